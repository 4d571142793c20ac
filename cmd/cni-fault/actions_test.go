package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/internal/testenv"
)

// prevResult100 is what a bridge plugin earlier in the chain hands on.
const prevResult100 = `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/proc/1/ns/net"}],` +
	`"ips":[{"address":"10.250.1.5/24","interface":0}]}`

func TestPassWithoutPrevResultIsAnEmptyResultOfTheConfigVersion(t *testing.T) {
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			h.cniVersion = v
			out := h.run(cniconf.VerbAdd, "pod-a").passed(t)
			var res map[string]any
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("result is not JSON: %q", out)
			}
			if res["cniVersion"] != v || res["ips"] != nil || res["interfaces"] != nil {
				t.Fatalf("want an empty %s result, got %s", v, out)
			}
		})
	}
}

func TestPassPrintsPrevResult(t *testing.T) {
	for _, tc := range []struct{ version, prev string }{
		{"1.0.0", prevResult100},
		{"1.1.0", strings.Replace(prevResult100, "1.0.0", "1.1.0", 1)},
		{"0.4.0", `{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.250.1.5/24"}]}`},
	} {
		t.Run(tc.version, func(t *testing.T) {
			h := newHarness(t)
			h.cniVersion, h.prevResult = tc.version, tc.prev
			assertResultIP(t, tc.version, h.run(cniconf.VerbAdd, "pod-a").passed(t))
		})
	}
}

func assertResultIP(t *testing.T, wantVersion, out string) {
	t.Helper()
	res, err := version.NewResult(wantVersion, []byte(out))
	if err != nil {
		t.Fatalf("result does not parse as %s: %v\n%s", wantVersion, err, out)
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.IPs) != 1 || cur.IPs[0].Address.String() != "10.250.1.5/24" {
		t.Fatalf("prevResult's address lost: %s", out)
	}
	if !strings.Contains(out, `"cniVersion": "`+wantVersion+`"`) {
		t.Fatalf("result is not at version %s: %s", wantVersion, out)
	}
}

func TestErrorPrintsACNIErrorAndExits1(t *testing.T) {
	h := newHarness(t)
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Step{Action: cniconf.ActionError, Code: 7, Msg: "injected", Details: "why"})
	e := h.run(cniconf.VerbAdd, "pod-a").cniError(t)
	if e.CNIVersion != "1.0.0" || e.Code != 7 || e.Msg != "injected" || e.Details != "why" {
		t.Fatalf("error %+v", e)
	}

	h.fault = h.fault.On(cniconf.VerbDel, cniconf.Fail(0, ""))
	e = h.run(cniconf.VerbDel, "pod-a").cniError(t)
	if e.Code != types.ErrInternal || e.Msg != "cni-fault: injected DEL error" {
		t.Fatalf("default error %+v", e)
	}
}

func TestExitPrintsNothing(t *testing.T) {
	h := newHarness(t)
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Exit(3).Times(1), cniconf.Exit(0))
	for _, want := range []int{3, 1} {
		o := h.run(cniconf.VerbAdd, "pod-a")
		if o.status.Signaled() || o.status.ExitStatus() != want || o.stdout != "" {
			t.Fatalf("want silent exit %d, got %v with %q", want, o.status, o.stdout)
		}
	}
}

// Signals the Go runtime would otherwise catch (SIGSEGV, SIGABRT) must reach
// the runtime as a death by that signal, not as exit status 2.
func TestCrashDiesByTheSignal(t *testing.T) {
	for _, tc := range []struct {
		name string
		want syscall.Signal
	}{{"", syscall.SIGKILL}, {"SIGSEGV", syscall.SIGSEGV}, {"SIGABRT", syscall.SIGABRT}, {"term", syscall.SIGTERM}, {"3", syscall.SIGQUIT}} {
		t.Run(tc.want.String(), func(t *testing.T) {
			h := newHarness(t)
			h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Crash(tc.name))
			o := h.run(cniconf.VerbAdd, "pod-a")
			if !o.status.Signaled() || o.status.Signal() != tc.want || o.stdout != "" {
				t.Fatalf("want death by %v and no output, got %v with %q", tc.want, o.status, o.stdout)
			}
		})
	}
}

func TestHangNeverExitsAndHoldsNoLock(t *testing.T) {
	h := newHarness(t)
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
	c, stdout := h.command(cniconf.VerbAdd, "pod-a")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	// It has taken its place in the sequence once it has journaled: only
	// then is the retry the second invocation, not the hanging one.
	testenv.Eventually(t, 10*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("hang exited by itself: %v, stdout %q", err, stdout)
		default:
		}
		if n := len(h.journal()); n < 1 {
			return fmt.Errorf("the hanging invocation has not journaled yet")
		}
		return nil
	})
	// The same pod's retry must not wait for the hanging invocation.
	h.run(cniconf.VerbAdd, "pod-a").passed(t)
	select {
	case err := <-done:
		t.Fatalf("hang exited by itself: %v", err)
	default:
	}
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	if ws := c.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL || stdout.Len() != 0 {
		t.Fatalf("hang ended with %v, stdout %q", ws, stdout)
	}
}

func TestDelayPassesAfterTheDelay(t *testing.T) {
	h := newHarness(t)
	h.prevResult = prevResult100
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Delay(400*time.Millisecond))
	o := h.run(cniconf.VerbAdd, "pod-a")
	assertResultIP(t, "1.0.0", o.passed(t))
	if o.elapsed < 400*time.Millisecond {
		t.Fatalf("returned after %v", o.elapsed)
	}
}

func TestGarbageIsNotJSON(t *testing.T) {
	h := newHarness(t)
	h.prevResult = prevResult100
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Garbage()).On(cniconf.VerbDel, cniconf.Garbage())
	for _, verb := range []cniconf.Verb{cniconf.VerbAdd, cniconf.VerbDel} {
		out := h.run(verb, "pod-a").passed(t)
		if out != garbage || json.Valid([]byte(out)) {
			t.Fatalf("%s: stdout %q", verb, out)
		}
	}
}

func TestOtherVerbs(t *testing.T) {
	h := newHarness(t)
	h.cniVersion = "1.1.0"
	h.prevResult = strings.Replace(prevResult100, "1.0.0", "1.1.0", 1)
	for _, verb := range []cniconf.Verb{cniconf.VerbDel, cniconf.VerbCheck, cniconf.VerbStatus, cniconf.VerbGC} {
		if out := h.run(verb, "pod-a").passed(t); out != "" {
			t.Fatalf("%s pass printed %q", verb, out)
		}
	}
	// STATUS and GC are node-level: a pod target does not exempt them, and
	// their counter already stands at 1 from the round above.
	h.fault.PodUID = "pod-b"
	h.fault = h.fault.
		On(cniconf.VerbDel, cniconf.Fail(11, "del").Times(1)).
		On(cniconf.VerbCheck, cniconf.Exit(4).Times(1)).
		On(cniconf.VerbStatus, cniconf.Pass().Times(1), cniconf.Fail(50, "plugin not available").Times(1)).
		On(cniconf.VerbGC, cniconf.Pass().Times(1), cniconf.Crash("SIGSEGV").Times(1))
	if e := h.run(cniconf.VerbDel, "pod-b").cniError(t); e.Code != 11 {
		t.Fatalf("DEL %+v", e)
	}
	if o := h.run(cniconf.VerbCheck, "pod-b"); o.status.ExitStatus() != 4 || o.stdout != "" {
		t.Fatalf("CHECK %v %q", o.status, o.stdout)
	}
	if e := h.run(cniconf.VerbStatus, "").cniError(t); e.Code != 50 {
		t.Fatalf("STATUS %+v", e)
	}
	if o := h.run(cniconf.VerbGC, ""); !o.status.Signaled() || o.status.Signal() != syscall.SIGSEGV {
		t.Fatalf("GC %v", o.status)
	}
	for _, verb := range []cniconf.Verb{cniconf.VerbDel, cniconf.VerbCheck, cniconf.VerbStatus, cniconf.VerbGC} {
		h.run(verb, "pod-b").passed(t)
	}
	// STATUS and GC ran three times on the node; pod-a's DEL and CHECK once
	// in the first round, pod-b's twice.
	for name, want := range map[string]int{"_node-STATUS": 3, "_node-GC": 3,
		"pod-a-DEL": 1, "pod-a-CHECK": 1, "pod-b-DEL": 2, "pod-b-CHECK": 2} {
		assertCounter(t, h, name, want)
	}
}

// skel refuses STATUS and GC for configs older than 1.1.0 before calling the
// plugin: nothing is counted or journaled.
func TestStatusNeedsCNI110(t *testing.T) {
	h := newHarness(t)
	h.fault = h.fault.On(cniconf.VerbStatus, cniconf.Fail(50, "x"))
	if e := h.run(cniconf.VerbStatus, "").cniError(t); e.Code != types.ErrIncompatibleCNIVersion {
		t.Fatalf("STATUS on 1.0.0: %+v", e)
	}
	if j := h.journal(); len(j) != 0 {
		t.Fatalf("journaled %+v", j)
	}
}

func TestInvalidConfigsAreRefused(t *testing.T) {
	for name, f := range map[string]func(*cniconf.Fault){
		"unknown action":    func(f *cniconf.Fault) { *f = f.On(cniconf.VerbAdd, cniconf.Step{Action: "explode"}) },
		"lower-case verb":   func(f *cniconf.Fault) { *f = f.On("add", cniconf.Pass()) },
		"relative stateDir": func(f *cniconf.Fault) { f.StateDir = "state"; *f = f.On(cniconf.VerbAdd, cniconf.Pass()) },
		"relative journal":  func(f *cniconf.Fault) { f.Journal = "j.jsonl" },
		"no stateDir":       func(f *cniconf.Fault) { f.StateDir = ""; *f = f.On(cniconf.VerbAdd, cniconf.Hang()) },
		"non-fatal signal":  func(f *cniconf.Fault) { *f = f.On(cniconf.VerbAdd, cniconf.Crash("SIGCHLD")) },
		"unknown signal":    func(f *cniconf.Fault) { *f = f.On(cniconf.VerbAdd, cniconf.Crash("SIGNOPE")) },
		"delay w/o delay":   func(f *cniconf.Fault) { *f = f.On(cniconf.VerbAdd, cniconf.Step{Action: cniconf.ActionDelay}) },
		"negative count":    func(f *cniconf.Fault) { *f = f.On(cniconf.VerbAdd, cniconf.Pass().Times(-1)) },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			f(&h.fault)
			if e := h.run(cniconf.VerbAdd, "pod-a").cniError(t); e.Code != types.ErrInvalidNetworkConfig || e.CNIVersion != "1.0.0" {
				t.Fatalf("%+v", e)
			}
		})
	}
}

// A key neither CNI nor the fault defines is refused, at the top level and in
// a step: decoded leniently, a misspelt key would be dropped and its fault
// never fire.
func TestUnknownKeysAreRefused(t *testing.T) {
	for name, extra := range map[string]map[string]json.RawMessage{
		"misspelt faults":    {"fualts": json.RawMessage(`{"ADD":[{"action":"error"}]}`)},
		"misspelt step key":  {"faults": json.RawMessage(`{"ADD":[{"action":"error","cout":1}]}`)},
		"unknown fault knob": {"faults": json.RawMessage(`{"ADD":[{"action":"exit","status":3,"timeout":"1s"}]}`)},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.extra = extra
			e := h.run(cniconf.VerbAdd, "pod-a").cniError(t)
			if e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, "unknown") {
				t.Fatalf("%+v", e)
			}
		})
	}
}

// What runtimes add to a plugin's config is not a fault key and passes.
func TestCNIKeysAreAccepted(t *testing.T) {
	h := newHarness(t)
	h.extra = map[string]json.RawMessage{
		"runtimeConfig":             json.RawMessage(`{"portMappings":[]}`),
		"capabilities":              json.RawMessage(`{"portMappings":true}`),
		"args":                      json.RawMessage(`{"cni":{}}`),
		"cni.dev/valid-attachments": json.RawMessage(`[]`),
	}
	h.run(cniconf.VerbAdd, "pod-a").passed(t)
}

// Runtimes ask VERSION before trusting a plugin with a config version.
func TestVersionListsSupportedSpecs(t *testing.T) {
	c := exec.Command(pluginBin)
	c.Env = []string{"CNI_COMMAND=VERSION"}
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Supported []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Join(v.Supported, ","); got != "0.3.0,0.3.1,0.4.0,1.0.0,1.1.0" {
		t.Fatalf("supported %s", got)
	}
}

// A faults file, where it exists, decides the faults at every invocation,
// whatever the config says: a runtime that tears down with the config
// cached at ADD (CRI-O) still meets a fault injected after the pod
// started, and its clearing.
func TestFaultsFileDecidesAtEveryInvocation(t *testing.T) {
	h := newHarness(t)
	file := filepath.Join(t.TempDir(), "faults.json")
	h.fault.FaultsFile = file
	if o := h.run(cniconf.VerbDel, "pod-a"); o.status.ExitStatus() != 0 {
		t.Fatalf("no faults file: DEL %v %s", o.status, o.stdout)
	}
	if err := cniconf.WriteFaults(file, map[cniconf.Verb][]cniconf.Step{cniconf.VerbDel: {cniconf.Fail(7, "agent down")}}); err != nil {
		t.Fatal(err)
	}
	if e := h.run(cniconf.VerbDel, "pod-a").cniError(t); e.Code != 7 || e.Msg != "agent down" {
		t.Fatalf("faults file with a DEL error: %+v", e)
	}
	if err := cniconf.WriteFaults(file, nil); err != nil {
		t.Fatal(err)
	}
	if o := h.run(cniconf.VerbDel, "pod-a"); o.status.ExitStatus() != 0 {
		t.Fatalf("cleared faults file: DEL %v %s", o.status, o.stdout)
	}
	if err := os.WriteFile(file, []byte(`{"faults":{"DEL":[{"action":"error","cuont":1}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if e := h.run(cniconf.VerbDel, "pod-a").cniError(t); e.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("a misspelt key in the faults file must be refused: %+v", e)
	}
}
