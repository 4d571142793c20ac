package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/cniconf"
)

// TestMain runs the wrapper itself when the test binary is exec'd as it.
func TestMain(m *testing.M) {
	if os.Getenv("CNIFAULT_WRAPPER_UNDER_TEST") != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

// bundleConfig is an OCI config as CRI-O writes it for an infra container,
// trimmed: oomScoreAdj and the neighbours the rewrite must keep.
const bundleConfig = `{
  "ociVersion": "1.0.2-dev",
  "process": {
    "user": {"uid": 0, "gid": 0},
    "args": ["/pause"],
    "env": ["PATH=/usr/bin"],
    "cwd": "/",
    "oomScoreAdj": -998
  },
  "root": {"path": "/rootfs", "readonly": true},
  "annotations": {"io.kubernetes.cri-o.SandboxID": "abc"}
}
`

func writeBundle(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readSpec(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("%s is no longer JSON: %v\n%s", path, err, raw)
	}
	return spec
}

func TestClampRaisesOOMScoreAdjToTheFloorAndKeepsTheRest(t *testing.T) {
	bundle := writeBundle(t, bundleConfig)
	path := filepath.Join(bundle, "config.json")
	changed, err := clampOOMScoreAdj(path, 0)
	if err != nil || !changed {
		t.Fatalf("clamp: changed %v, %v", changed, err)
	}
	spec := readSpec(t, path)
	process := spec["process"].(map[string]any)
	if adj := process["oomScoreAdj"]; adj != float64(0) {
		t.Fatalf("oomScoreAdj %v, want 0", adj)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(bundleConfig), &want); err != nil {
		t.Fatal(err)
	}
	want["process"].(map[string]any)["oomScoreAdj"] = float64(0)
	gotRaw, _ := json.Marshal(spec)
	wantRaw, _ := json.Marshal(want)
	if string(gotRaw) != string(wantRaw) {
		t.Fatalf("other fields changed:\n got %s\nwant %s", gotRaw, wantRaw)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600 kept", st.Mode(), err)
	}
	entries, _ := os.ReadDir(bundle)
	if len(entries) != 1 {
		t.Fatalf("the atomic rewrite left files behind: %v", entries)
	}
}

func TestClampLeavesAllowedValuesAlone(t *testing.T) {
	for _, config := range []string{
		strings.Replace(bundleConfig, "-998", "500", 1),
		strings.Replace(bundleConfig, `"oomScoreAdj": -998`, `"terminal": false`, 1),
		`{"ociVersion": "1.0.2-dev"}`,
	} {
		bundle := writeBundle(t, config)
		path := filepath.Join(bundle, "config.json")
		changed, err := clampOOMScoreAdj(path, 0)
		if err != nil || changed {
			t.Fatalf("clamp of %s: changed %v, %v", config, changed, err)
		}
		if raw, _ := os.ReadFile(path); string(raw) != config {
			t.Fatalf("file rewritten:\n%s", raw)
		}
	}
}

func TestClampRefusesABrokenConfig(t *testing.T) {
	bundle := writeBundle(t, `{"process": `)
	if _, err := clampOOMScoreAdj(filepath.Join(bundle, "config.json"), 0); err == nil {
		t.Fatal("no error for a config that is not JSON")
	}
}

func TestBundleOf(t *testing.T) {
	wd, _ := os.Getwd()
	for _, c := range []struct {
		args   []string
		bundle string
		ok     bool
	}{
		// conmon's create, as CRI-O's runtime_oci.go has it run.
		{[]string{"--root=/run/x/runc", "--log", "/b/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/pidfile", "abc"}, "/b", true},
		{[]string{"--root", "/run/x/runc", "create", "-b", "/b2", "abc"}, "/b2", true},
		{[]string{"run", "--bundle=/b3", "abc"}, "/b3", true},
		{[]string{"--systemd-cgroup", "create", "abc"}, wd, true},
		{[]string{"--root", "/run/x/runc", "start", "abc"}, "", false},
		{[]string{"--root", "/run/x/runc", "state", "create"}, "", false},
		{[]string{"--version"}, "", false},
		{nil, "", false},
	} {
		bundle, ok := bundleOf(c.args)
		if ok != c.ok || bundle != c.bundle {
			t.Errorf("bundleOf(%q) = %q, %v; want %q, %v", c.args, bundle, ok, c.bundle, c.ok)
		}
	}
}

// The wrapper as runc sees it: the bundle's config is clamped to the
// wrapper's own oom_score_adj before the real runc runs, with the argv it
// was given; other commands reach runc untouched.
func TestWrapperClampsThenExecsTheRealRunc(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	fake := filepath.Join(dir, "fake-runc")
	script := "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > " + record + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	own, err := ownOOMScoreAdj()
	if err != nil {
		t.Fatal(err)
	}
	bundle := writeBundle(t, strings.Replace(bundleConfig, "-998", "-1000", 1))
	run := func(args ...string) []string {
		t.Helper()
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "CNIFAULT_WRAPPER_UNDER_TEST=1", RealRuncEnv+"="+fake)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("wrapper %v: %v\n%s", args, err, out)
		}
		raw, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(raw)), "\n")
	}

	args := []string{"--root", "/run/x/runc", "create", "--bundle", bundle, "--pid-file", bundle + "/pidfile", "abc"}
	if got := run(args...); !slices.Equal(got, append([]string{fake}, args...)) {
		t.Fatalf("runc got argv %q, want %q", got, args)
	}
	adj := readSpec(t, filepath.Join(bundle, "config.json"))["process"].(map[string]any)["oomScoreAdj"]
	if adj != float64(own) {
		t.Fatalf("oomScoreAdj %v after create, want the wrapper's own %d", adj, own)
	}

	other := writeBundle(t, bundleConfig)
	args = []string{"--root", "/run/x/runc", "delete", "--force", "abc"}
	if got := run(args...); !slices.Equal(got, append([]string{fake}, args...)) {
		t.Fatalf("runc got argv %q, want %q", got, args)
	}
	if raw, _ := os.ReadFile(filepath.Join(other, "config.json")); string(raw) != bundleConfig {
		t.Fatalf("a bundle was touched by delete:\n%s", raw)
	}
}

// A create of the faulted pod's container fails before runc runs, and is
// journaled; another pod's, and any other subcommand, go through.
func TestAFaultFailsItsPodsCreateOnly(t *testing.T) {
	dir := t.TempDir()
	faults, journal := filepath.Join(dir, "faults"), filepath.Join(dir, "journal.jsonl")
	if err := cniconf.WriteRuncFault(faults, "s1", cniconf.RuncFault{PodUID: "uid-1", Msg: "no", Journal: journal}); err != nil {
		t.Fatal(err)
	}
	bundle := func(uid string) string {
		b := filepath.Join(dir, uid)
		if err := os.MkdirAll(b, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := `{"annotations":{"io.kubernetes.cri.sandbox-uid":"` + uid + `"}}`
		if err := os.WriteFile(filepath.Join(b, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b1, b2 := bundle("uid-1"), bundle("uid-2")
	if err := injectFault(faults, b1, []string{"--root", "/r", "create", "--bundle", b1, "sb1"}); err == nil || err.Error() != "no" {
		t.Errorf("create of the faulted pod: %v, want its message", err)
	}
	if err := injectFault(faults, b2, []string{"--root", "/r", "create", "--bundle", b2, "sb2"}); err != nil {
		t.Errorf("create of another pod: %v", err)
	}
	if err := injectFault(faults, b1, []string{"--root", "/r", "run", "--bundle", b1, "x"}); err != nil {
		t.Errorf("run: %v", err)
	}
	if err := injectFault("", b1, []string{"create", "--bundle", b1, "sb1"}); err != nil {
		t.Errorf("no fault dir: %v", err)
	}
	entries, err := cniconf.ReadJournal(journal)
	if err != nil || len(entries) != 1 || !entries[0].Fired() || entries[0].ContainerID != "sb1" || entries[0].PodUID != "uid-1" {
		t.Errorf("journal = %+v (%v), want one fired create of sb1", entries, err)
	}
}
