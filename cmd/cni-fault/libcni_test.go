package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cnifault/cnifault/cniconf"
)

// chainExec runs the real cni-fault and stands in for every other plugin of
// the list, recording what libcni sends it: libcni's own order of calls is
// what these tests pin, without root or the reference plugins.
type chainExec struct {
	mu    sync.Mutex
	calls []chainCall
	// fail makes a stand-in fail a verb ("bridge STATUS").
	fail map[string]bool
}

type chainCall struct {
	plugin, command, containerID string
	stdin                        map[string]json.RawMessage
}

func (c chainCall) String() string { return c.plugin + " " + c.command + " " + c.containerID }

// stubResult is what the stand-in bridge returns on ADD: a host veth and the
// pod's interface with an address, as the reference bridge does.
const stubResult = `{"cniVersion":"1.1.0","interfaces":[{"name":"veth0"},{"name":"eth0","sandbox":"/proc/1/ns/net"}],` +
	`"ips":[{"address":"10.250.1.5/24","interface":1}]}`

func (e *chainExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	call := chainCall{plugin: filepath.Base(path), command: envOf(environ, "CNI_COMMAND"), containerID: envOf(environ, "CNI_CONTAINERID")}
	if err := json.Unmarshal(stdin, &call.stdin); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.calls = append(e.calls, call)
	fail := e.fail[call.plugin+" "+call.command]
	e.mu.Unlock()
	if path == pluginBin {
		return (&invoke.RawExec{Stderr: os.Stderr}).ExecPlugin(ctx, path, stdin, environ)
	}
	if fail {
		return nil, errors.New("stand-in " + call.String() + " fails")
	}
	if call.command == "ADD" {
		return []byte(stubResult), nil
	}
	return nil, nil
}

func (e *chainExec) FindInPath(plugin string, _ []string) (string, error) {
	if plugin == cniconf.FaultPluginType {
		return pluginBin, nil
	}
	return "/stand-in/" + plugin, nil
}

func (e *chainExec) Decode(raw []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(raw)
}

func (e *chainExec) took() []chainCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.calls
	e.calls = nil
	return out
}

func envOf(environ []string, key string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func callNames(calls []chainCall) string {
	var s []string
	for _, c := range calls {
		s = append(s, c.String())
	}
	return strings.Join(s, ", ")
}

// chain is the harness's 1.1 chain, bridge then cni-fault, as libcni loads it.
func chain(t *testing.T, h *harness, v string, disableGC bool) (*libcni.NetworkConfigList, *libcni.CNIConfig, *chainExec, string) {
	t.Helper()
	n := cniconf.Network{Name: "cnifault-gc", Bridge: "cnf-gc", Subnet: "10.250.1.0/24", IPAMDataDir: "/nonexistent"}
	l := cniconf.NewList(n.Name, n.BridgePlugin(), h.fault).AtVersion(v)
	l.DisableGC = disableGC
	raw, err := l.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	exec := &chainExec{fail: map[string]bool{}}
	cache := t.TempDir()
	return list, libcni.NewCNIConfigWithCacheDir([]string{"/stand-in"}, cache, exec), exec, filepath.Join(cache, "results")
}

func addPod(t *testing.T, cfg *libcni.CNIConfig, list *libcni.NetworkConfigList, pod string) {
	t.Helper()
	rt := &libcni.RuntimeConf{ContainerID: "ctr-" + pod, NetNS: "/proc/1/ns/net", IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_UID", pod}}}
	if _, err := cfg.AddNetworkList(t.Context(), list, rt); err != nil {
		t.Fatal(err)
	}
}

// What cni-fault's passing GC and STATUS rest on: libcni calls every plugin
// of a 1.1.0 list itself, bridge first, so cni-fault has nothing to pass on.
// GC first replays, as DEL through the whole chain, every cached attachment
// missing from the list (the pod's cached CNI_ARGS make it an ordinary,
// pod-targeted DEL to cni-fault), and hands each plugin the list unchanged.
func TestLibcniCallsEveryPluginOnGCAndStatus(t *testing.T) {
	h := newHarness(t)
	list, cfg, exec, results := chain(t, h, cniconf.CNIVersion110, false)
	addPod(t, cfg, list, "pod-a")
	addPod(t, cfg, list, "pod-b")
	exec.took()

	valid := []cniconf.Attachment{att("ctr-pod-b", "eth0")}
	gcArgs := &libcni.GCArgs{}
	for _, a := range valid {
		gcArgs.ValidAttachments = append(gcArgs.ValidAttachments, typesAttachment(a))
	}
	if err := cfg.GCNetworkList(t.Context(), list, gcArgs); err != nil {
		t.Fatal(err)
	}
	calls := exec.took()
	if got := callNames(calls); got != "cni-fault DEL ctr-pod-a, bridge DEL ctr-pod-a, bridge GC , cni-fault GC " {
		t.Fatalf("GC calls: %s", got)
	}
	for _, c := range calls[2:] {
		if string(c.stdin["cni.dev/valid-attachments"]) != `[{"containerID":"ctr-pod-b","ifname":"eth0"}]` {
			t.Fatalf("%s got %s", c, c.stdin["cni.dev/valid-attachments"])
		}
	}
	if entries, _ := os.ReadDir(results); len(entries) != 1 || entries[0].Name() != "cnifault-gc-ctr-pod-b-eth0" {
		t.Fatalf("cache after GC: %v", entries)
	}

	if err := cfg.GetStatusNetworkList(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	if got := callNames(exec.took()); got != "bridge STATUS , cni-fault STATUS " {
		t.Fatalf("STATUS calls: %s", got)
	}

	j := h.journal()
	var got []string
	for _, e := range j {
		got = append(got, string(e.Verb)+" "+e.PodUID)
	}
	if strings.Join(got, ",") != "ADD pod-a,ADD pod-b,DEL pod-a,GC ,STATUS " {
		t.Fatalf("journal %v", got)
	}
	if gc := j[3]; gc.ValidAttachmentsKey != cniconf.KeyList || !slices.Equal(gc.ValidAttachments, valid) {
		t.Fatalf("GC journaled %s %v", gc.ValidAttachmentsKey, gc.ValidAttachments)
	}
	assertCounter(t, h, "pod-a-DEL", 1)
}

// A failing plugin stops STATUS for the rest of the list but not GC, as the
// spec has it: a STATUS fault on cni-fault is seen only if the plugins before
// it pass, a GC fault always.
func TestLibcniStatusStopsAtAnErrorGCGoesOn(t *testing.T) {
	h := newHarness(t)
	list, cfg, exec, _ := chain(t, h, cniconf.CNIVersion110, false)
	exec.fail["bridge STATUS"], exec.fail["bridge GC"] = true, true
	if err := cfg.GetStatusNetworkList(t.Context(), list); err == nil {
		t.Fatal("STATUS passed over a failing bridge")
	}
	if got := callNames(exec.took()); got != "bridge STATUS " {
		t.Fatalf("STATUS calls: %s", got)
	}
	if err := cfg.GCNetworkList(t.Context(), list, &libcni.GCArgs{}); err == nil {
		t.Fatal("GC passed over a failing bridge")
	}
	if got := callNames(exec.took()); got != "bridge GC , cni-fault GC " {
		t.Fatalf("GC calls: %s", got)
	}
	// A nil list in GCArgs goes out as null.
	if j := h.journal(); len(j) != 1 || j[0].Verb != cniconf.VerbGC || j[0].ValidAttachmentsKey != cniconf.KeyNull {
		t.Fatalf("journal %+v", j)
	}
}

// Below 1.1.0 libcni sends neither verb; GC still replays DEL for stale
// cached attachments, and with no GCArgs every cached attachment is stale.
func TestLibcniSendsNoNodeVerbsBelow110(t *testing.T) {
	h := newHarness(t)
	list, cfg, exec, results := chain(t, h, cniconf.DefaultCNIVersion, false)
	addPod(t, cfg, list, "pod-a")
	exec.took()
	if err := cfg.GetStatusNetworkList(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	if err := cfg.GCNetworkList(t.Context(), list, nil); err != nil {
		t.Fatal(err)
	}
	if got := callNames(exec.took()); got != "cni-fault DEL ctr-pod-a, bridge DEL ctr-pod-a" {
		t.Fatalf("calls: %s", got)
	}
	if entries, _ := os.ReadDir(results); len(entries) != 0 {
		t.Fatalf("cache after GC: %v", entries)
	}
}

// disableGC stops libcni's GC before it reads the cache: no DEL replayed, no
// plugin called, the stale entry kept.
func TestLibcniSkipsGCOfADisableGCList(t *testing.T) {
	h := newHarness(t)
	list, cfg, exec, results := chain(t, h, cniconf.CNIVersion110, true)
	addPod(t, cfg, list, "pod-a")
	exec.took()
	if err := cfg.GCNetworkList(t.Context(), list, &libcni.GCArgs{}); err != nil {
		t.Fatal(err)
	}
	if calls := exec.took(); len(calls) != 0 {
		t.Fatalf("calls: %s", callNames(calls))
	}
	if entries, _ := os.ReadDir(results); len(entries) != 1 {
		t.Fatalf("cache after GC: %v", entries)
	}
}

func typesAttachment(a cniconf.Attachment) types.GCAttachment {
	return types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}
}
