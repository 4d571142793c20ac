package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cnifault/cnifault/cniconf"
)

// pluginBin is the plugin built once per test binary: the tests drive it the
// way a runtime does, through env, stdin and exit status.
var pluginBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cni-fault-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pluginBin = filepath.Join(dir, "cni-fault")
	// Built as the Makefile builds it: static, as a runtime's bin dir needs.
	build := exec.Command("go", "build", "-o", pluginBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cni-fault:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// harness is one plugin installation: a config and a dir that must end up
// holding nothing but the journal and the state dir.
type harness struct {
	t          *testing.T
	dir, cwd   string
	fault      cniconf.Fault
	cniVersion string
	prevResult string // raw JSON, optional
	// extra are top-level keys added to the config as they are.
	extra map[string]json.RawMessage
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), cwd: t.TempDir(), cniVersion: "1.0.0"}
	h.fault = cniconf.Fault{Journal: filepath.Join(h.dir, "journal.jsonl"), StateDir: filepath.Join(h.dir, "state")}
	t.Cleanup(func() {
		if entries, _ := os.ReadDir(h.cwd); len(entries) != 0 {
			t.Errorf("plugin wrote into its working dir: %v", entries)
		}
		entries, _ := os.ReadDir(h.dir)
		for _, e := range entries {
			if e.Name() != "journal.jsonl" && e.Name() != "state" {
				t.Errorf("plugin left %s outside journal and stateDir", e.Name())
			}
		}
	})
	return h
}

// config is the plugin's stdin as libcni builds it from a conflist entry.
func (h *harness) config() []byte {
	h.t.Helper()
	raw, err := json.Marshal(h.fault)
	if err != nil {
		h.t.Fatal(err)
	}
	conf := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &conf); err != nil {
		h.t.Fatal(err)
	}
	conf["cniVersion"], _ = json.Marshal(h.cniVersion)
	conf["name"], _ = json.Marshal("cnifault-test")
	conf["type"], _ = json.Marshal(cniconf.FaultPluginType)
	if h.prevResult != "" {
		conf["prevResult"] = json.RawMessage(h.prevResult)
	}
	for k, v := range h.extra {
		conf[k] = v
	}
	out, err := json.Marshal(conf)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// command prepares one invocation for pod ("" for none). STATUS and GC get
// only what a runtime passes for them.
func (h *harness) command(verb cniconf.Verb, pod string) (*exec.Cmd, *bytes.Buffer) {
	c := exec.Command(pluginBin)
	c.Dir = h.cwd
	c.Env = []string{"CNI_COMMAND=" + string(verb), "CNI_PATH=" + filepath.Dir(pluginBin)}
	if verb != cniconf.VerbStatus && verb != cniconf.VerbGC {
		args := "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p"
		if pod != "" {
			args += ";K8S_POD_UID=" + pod
		}
		c.Env = append(c.Env, "CNI_CONTAINERID=ctr-"+pod, "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=eth0", "CNI_ARGS="+args)
	}
	c.Stdin = bytes.NewReader(h.config())
	var stdout bytes.Buffer
	c.Stdout = &stdout
	c.Stderr = os.Stderr
	return c, &stdout
}

// outcome is what a runtime observes of one invocation.
type outcome struct {
	stdout  string
	status  syscall.WaitStatus
	pid     int
	elapsed time.Duration
}

func (h *harness) run(verb cniconf.Verb, pod string) outcome {
	h.t.Helper()
	c, stdout := h.command(verb, pod)
	start := time.Now()
	err := c.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		h.t.Fatalf("%s: %v", verb, err)
	}
	return outcome{stdout.String(), c.ProcessState.Sys().(syscall.WaitStatus), c.ProcessState.Pid(), time.Since(start)}
}

// cniError decodes stdout as a CNI error object.
func (o outcome) cniError(t *testing.T) (e struct {
	CNIVersion string `json:"cniVersion"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details"`
}) {
	t.Helper()
	if o.status.Signaled() || o.status.ExitStatus() != 1 {
		t.Fatalf("want exit 1 with an error, got %v, stdout %q", o.status, o.stdout)
	}
	if err := json.Unmarshal([]byte(o.stdout), &e); err != nil || e.Code == 0 {
		t.Fatalf("stdout is not a CNI error (%v): %q", err, o.stdout)
	}
	return e
}

// passed asserts exit 0; it returns stdout for the caller to inspect.
func (o outcome) passed(t *testing.T) string {
	t.Helper()
	if o.status.Signaled() || o.status.ExitStatus() != 0 {
		t.Fatalf("want exit 0, got %v, stdout %q", o.status, o.stdout)
	}
	return o.stdout
}

func (h *harness) journal() []cniconf.JournalEntry {
	h.t.Helper()
	entries, err := cniconf.ReadJournal(h.fault.Journal)
	if err != nil {
		h.t.Fatal(err)
	}
	return entries
}
