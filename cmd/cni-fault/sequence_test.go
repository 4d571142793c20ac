package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cnifault/cnifault/cniconf"
)

func assertCounter(t *testing.T, h *harness, name string, want int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.fault.StateDir, name+".count"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := strconv.Atoi(strings.TrimSpace(string(raw))); err != nil || got != want {
		t.Fatalf("%s counts %q, want %d", name, raw, want)
	}
}

func TestPick(t *testing.T) {
	fail, hang := cniconf.Fail(1, "x"), cniconf.Hang()
	for _, tc := range []struct {
		steps []cniconf.Step
		n     int
		want  int
	}{
		{nil, 0, -1},
		{[]cniconf.Step{fail.Times(2), hang.Times(1)}, 0, 0},
		{[]cniconf.Step{fail.Times(2), hang.Times(1)}, 1, 0},
		{[]cniconf.Step{fail.Times(2), hang.Times(1)}, 2, 1},
		{[]cniconf.Step{fail.Times(2), hang.Times(1)}, 3, -1},
		{[]cniconf.Step{fail.Times(1), hang}, 100, 1},
		{[]cniconf.Step{fail, hang}, 5, 0},
	} {
		if got, _ := cniconf.Pick(tc.steps, tc.n); got != tc.want {
			t.Errorf("Pick(%v, %d) = %d, want %d", tc.steps, tc.n, got, tc.want)
		}
	}
}

func TestFailOnceThenPassForTheTargetedPodOnly(t *testing.T) {
	h := newHarness(t)
	h.fault.PodUID = "pod-a"
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Fail(7, "injected").Times(1), cniconf.Pass())
	h.run(cniconf.VerbAdd, "pod-b").passed(t)
	if e := h.run(cniconf.VerbAdd, "pod-a").cniError(t); e.Code != 7 || e.Msg != "injected" {
		t.Fatalf("first ADD of the target: %+v", e)
	}
	h.run(cniconf.VerbAdd, "pod-a").passed(t)
	h.run(cniconf.VerbAdd, "pod-b").passed(t)
	h.run(cniconf.VerbAdd, "").passed(t)

	j := h.journal()
	want := []struct {
		pod      string
		action   cniconf.Action
		step, n  int
		targeted bool
	}{
		{"pod-b", cniconf.ActionPass, -1, 0, false},
		{"pod-a", cniconf.ActionError, 0, 0, true},
		{"pod-a", cniconf.ActionPass, 1, 1, true},
		{"pod-b", cniconf.ActionPass, -1, 1, false},
		{"", cniconf.ActionPass, -1, 0, false},
	}
	if len(j) != len(want) {
		t.Fatalf("journal %+v", j)
	}
	for i, w := range want {
		if e := j[i]; e.PodUID != w.pod || e.Action != w.action || e.Step != w.step || e.Invocation != w.n || e.Targeted != w.targeted {
			t.Errorf("line %d: %+v, want %+v", i, e, w)
		}
	}
}

// Finite sequences end in pass, and every pod gets its own sequence.
func TestCountersArePerPodAndVerb(t *testing.T) {
	h := newHarness(t)
	h.fault = h.fault.
		On(cniconf.VerbAdd, cniconf.Fail(7, "a").Times(1), cniconf.Exit(3).Times(1)).
		On(cniconf.VerbDel, cniconf.Fail(8, "d").Times(1))
	h.run(cniconf.VerbAdd, "pod-a").cniError(t)
	h.run(cniconf.VerbAdd, "pod-b").cniError(t)
	if e := h.run(cniconf.VerbDel, "pod-a").cniError(t); e.Code != 8 {
		t.Fatalf("DEL counted with ADD: %+v", e)
	}
	if o := h.run(cniconf.VerbAdd, "pod-a"); o.status.ExitStatus() != 3 {
		t.Fatalf("second ADD of pod-a: %v", o.status)
	}
	h.run(cniconf.VerbAdd, "pod-a").passed(t)
	h.run(cniconf.VerbDel, "pod-a").passed(t)
	h.run(cniconf.VerbAdd, "").cniError(t)
	for name, want := range map[string]int{"pod-a-ADD": 3, "pod-b-ADD": 1, "pod-a-DEL": 2, "_all-ADD": 1} {
		assertCounter(t, h, name, want)
	}
}

func TestStateFileNames(t *testing.T) {
	for uid, want := range map[string]string{
		"0f8a5a6e-1c1d-4b8e-9a43-2f1c2b7d9e10": "0f8a5a6e-1c1d-4b8e-9a43-2f1c2b7d9e10-ADD.count",
		"":                                     "_all-ADD.count",
		"_all":                                 "%5Fall-ADD.count",
		"../x y":                               "..%2Fx%20y-ADD.count",
	} {
		if got := filepath.Base(counterPath("/s", cniconf.VerbAdd, uid)); got != want {
			t.Errorf("uid %q: %s, want %s", uid, got, want)
		}
	}
	if got := counterPath("/s", cniconf.VerbGC, "pod"); got != "/s/_node-GC.count" {
		t.Errorf("GC counter %s", got)
	}
	if got := filepath.Base(counterPath("/s", cniconf.VerbAdd, strings.Repeat("x", 200))); len(got) > 100 || !strings.HasPrefix(got, "sha256-") {
		t.Errorf("long uid gives %s", got)
	}
}

// The flock makes concurrent invocations take distinct numbers, so "fail
// three times" fails exactly three of eight simultaneous ADDs.
func TestConcurrentInvocationsCountExactly(t *testing.T) {
	for round := range 3 {
		h := newHarness(t)
		h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Fail(7, "busy").Times(3), cniconf.Pass())
		outcomes := make([]outcome, 8)
		var wg sync.WaitGroup
		for i := range outcomes {
			wg.Go(func() {
				c, stdout := h.command(cniconf.VerbAdd, "pod-a")
				_ = c.Run()
				outcomes[i] = outcome{stdout: stdout.String(), status: c.ProcessState.Sys().(syscall.WaitStatus)}
			})
		}
		wg.Wait()
		errs := 0
		for _, o := range outcomes {
			switch {
			case o.status.ExitStatus() == 1:
				o.cniError(t)
				errs++
			default:
				o.passed(t)
			}
		}
		if errs != 3 {
			t.Fatalf("round %d: %d errors, want 3", round, errs)
		}
		var ns []int
		for _, e := range h.journal() {
			ns = append(ns, e.Invocation)
		}
		slices.Sort(ns)
		if !slices.Equal(ns, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
			t.Fatalf("round %d: invocation numbers %v", round, ns)
		}
		assertCounter(t, h, "pod-a-ADD", 8)
	}
}

// A storm's pods are all targets, each with its own sequence; a pod
// neither field names passes untouched.
func TestEveryPodOfPodUIDsIsATargetOnItsOwnCount(t *testing.T) {
	h := newHarness(t)
	h.fault.PodUID = "pod-a"
	h.fault.PodUIDs = []string{"pod-b", "pod-c"}
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Fail(7, "injected").Times(1), cniconf.Pass())
	for _, pod := range []string{"pod-a", "pod-b", "pod-c"} {
		if e := h.run(cniconf.VerbAdd, pod).cniError(t); e.Code != 7 {
			t.Fatalf("first ADD of %s: %+v", pod, e)
		}
	}
	h.run(cniconf.VerbAdd, "pod-b").passed(t)
	h.run(cniconf.VerbAdd, "pod-d").passed(t)
	var targeted []string
	for _, e := range h.journal() {
		if e.Targeted {
			targeted = append(targeted, e.PodUID)
		}
	}
	if want := []string{"pod-a", "pod-b", "pod-c", "pod-b"}; !slices.Equal(targeted, want) {
		t.Errorf("targeted %v, want %v", targeted, want)
	}
}
