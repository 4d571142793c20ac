package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/cnifault/cnifault/cniconf"
)

func configured(t *testing.T) (*plugin, cniconf.NRIPluginConfig) {
	t.Helper()
	dir := t.TempDir()
	c := cniconf.NRIPluginConfig{FaultDir: filepath.Join(dir, "faults"), Journal: filepath.Join(dir, "journal.jsonl"), Log: filepath.Join(dir, "plugin.log")}
	if err := os.MkdirAll(c.FaultDir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(c)
	p := &plugin{}
	if _, err := p.Configure(t.Context(), string(raw), "containerd", "v2.4.2"); err != nil {
		t.Fatal(err)
	}
	return p, c
}

// A fault rejects its pod's event as many times as it says, then passes;
// another pod's events pass, and every event is journaled.
func TestAFaultRejectsItsPodOnly(t *testing.T) {
	p, c := configured(t)
	if err := cniconf.WriteNRIFault(c.FaultDir, "s1", cniconf.NRIFault{PodUID: "uid-1", Faults: map[cniconf.Verb][]cniconf.Step{
		cniconf.NRIRunPodSandbox: {cniconf.Fail(0, "no").Times(2)},
	}}); err != nil {
		t.Fatal(err)
	}
	target := &api.PodSandbox{Id: "sb1", Uid: "uid-1", Linux: &api.LinuxPodSandbox{Namespaces: []*api.LinuxNamespace{{Type: "network", Path: "/run/netns/x"}}}}
	other := &api.PodSandbox{Id: "sb2", Uid: "uid-2"}
	for i, want := range []string{"no", "no", ""} {
		err := p.RunPodSandbox(t.Context(), target)
		if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("RunPodSandbox #%d = %v, want %q", i, err, want)
		}
		if err := p.RunPodSandbox(t.Context(), other); err != nil {
			t.Errorf("an untargeted pod was rejected: %v", err)
		}
	}
	if err := p.StopPodSandbox(t.Context(), target); err != nil {
		t.Errorf("StopPodSandbox has no fault and failed: %v", err)
	}
	entries, err := cniconf.ReadJournal(c.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 7 {
		t.Fatalf("journal has %d lines, want 7: %+v", len(entries), entries)
	}
	first := entries[0]
	if !first.Fired() || first.Verb != cniconf.NRIRunPodSandbox || first.ContainerID != "sb1" || first.Netns != "/run/netns/x" || first.Invocation != 0 {
		t.Errorf("first line = %+v, want a fired RunPodSandbox of sb1", first)
	}
	if e := entries[4]; e.Fired() || !e.Targeted || e.Invocation != 2 || e.Step != -1 {
		t.Errorf("third targeted line = %+v, want invocation 2 past the sequence", e)
	}
	if e := entries[1]; e.Targeted || e.PodUID != "uid-2" {
		t.Errorf("untargeted line = %+v", e)
	}
}

// Synchronize is journaled: the harness waits for it to know the plugin
// is registered.
func TestSynchronizeIsJournaled(t *testing.T) {
	p, c := configured(t)
	if _, err := p.Synchronize(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	entries, _ := cniconf.ReadJournal(c.Journal)
	if len(entries) != 1 || entries[0].Verb != cniconf.NRISynchronize || entries[0].PID == 0 {
		t.Errorf("journal = %+v, want one Synchronize with a pid", entries)
	}
}

// A config without its paths is refused at registration, in one line.
func TestConfigureRefusesAnIncompleteConfig(t *testing.T) {
	p := &plugin{}
	if _, err := p.Configure(t.Context(), `{"faultDir":"/x"}`, "crio", "1.34.0"); err == nil || !strings.Contains(err.Error(), "journal") {
		t.Errorf("Configure = %v, want the missing journal named", err)
	}
}

// Only actions an RPC answer can express are accepted.
func TestAFaultTheNRIPluginCannotApplyIsRefused(t *testing.T) {
	err := cniconf.WriteNRIFault(t.TempDir(), "x", cniconf.NRIFault{PodUID: "u", Faults: map[cniconf.Verb][]cniconf.Step{
		cniconf.NRIRunPodSandbox: {cniconf.Hang()},
	}})
	if err == nil || !strings.Contains(err.Error(), "hang") {
		t.Errorf("WriteNRIFault = %v, want hang refused", err)
	}
}
