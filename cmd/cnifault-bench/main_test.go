package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cnifault/cnifault/fixtures/report"
)

// run is a catalog run of procs processes whose scenarios took the given
// seconds, each in the process given.
func run(name string, procs int, wall, cpu float64, scenarios ...report.Scenario) catalogRun {
	fam := "containerd"
	if strings.HasPrefix(name, "crio") {
		fam = "cri-o"
	}
	return catalogRun{runtime: name, procs: procs, wall: time.Duration(wall * float64(time.Second)), cpu: time.Duration(cpu * float64(time.Second)),
		rep: &report.Report{Runtime: report.Runtime{Managed: name, Name: fam, BringUpSeconds: 1}, Processes: procs, Scenarios: scenarios}}
}

func sc(id, verdict string, secs float64, process int) report.Scenario {
	return report.Scenario{ID: id, Verdict: verdict, DurationSeconds: secs, Process: process}
}

// The summary prints each runtime's catalog in one process and in
// parallel, their CPU, ratio and floor (the longer of the longest scenario
// and the CPU over the cores), and judges the targets by family.
func TestSummaryJudgesTheTargets(t *testing.T) {
	b := bench{cores: 2, load0: "1.00 0.50 0.20", load1: "2.00 1.00 0.50"}
	b.catalogs = []pair{
		{runtime: "containerd-2.4",
			serial:   run("containerd-2.4", 1, 80, 60, sc("storm-add-hang", "pass", 23, 0), sc("add-error", "pass", 1, 0)),
			parallel: run("containerd-2.4", 4, 40, 66, sc("storm-add-hang", "pass", 30, 1), sc("add-error", "pass", 2, 2))},
		{runtime: "crio-1.36",
			serial:   run("crio-1.36", 1, 140, 100, sc("storm-add-hang", "pass", 36, 0), sc("add-hang-deadline", "fail", 18, 0)),
			parallel: run("crio-1.36", 4, 100, 120, sc("storm-add-hang", "pass", 60, 1), sc("add-hang-deadline", "pass", 20, 1))},
	}
	b.matrixRun = &matrixRun{jobs: 2, wall: 5 * time.Minute, cpu: 9 * time.Minute, reports: make([]*report.Report, 10)}
	b.test = &ciRun{Seconds: 14 * 60, Finished: "2026-12-05T21:00:00Z", Commit: "abc1234", Load: "3.0 2.0 1.0"}
	got := b.summary()
	mustContain(t, "summary", got,
		"load average at the start 1.00 0.50 0.20, at the end 2.00 1.00 0.50; 2 cores",
		"containerd-2.4        1.0s      80.0s     60.0s      4      40.0s     66.0s   0.50    30.0s    1.33  same",
		"crio-1.36             1.0s     140.0s    100.0s      4     100.0s    120.0s   0.71    50.0s    2.00  add-hang-deadline: verdict fail became pass",
		"floor containerd-2.4   30.0s (longest storm-add-hang 23.0s; CPU 60.0s / 2 cores = 30.0s)",
		"matrix: 10 runtimes, parallel catalogs, 2 at once: 5m0s wall; CPU 9m0s (over 2 cores: 4m30s)",
		"make test (.ci/run's record, 2026-12-05T21:00:00Z at abc1234, load average 3.0 2.0 1.0): 14m0s, exit status 0",
		"target: a parallel containerd catalog <= 0.55× its time in one process: worst containerd-2.4 0.50 (met)",
		"target: a parallel containerd catalog <= 1.5× its floor: worst containerd-2.4 1.33 (met)",
		"target: a parallel cri-o catalog <= 0.55× its time in one process: worst crio-1.36 0.71 (missed)",
		"target: a parallel cri-o catalog <= 1.5× its floor: worst crio-1.36 2.00 (missed)",
		"target: the matrix of parallel catalogs <= 6m0s: 5m0s (met)",
		"target: make test <= 15m0s: 14m0s (met)",
		// The missed one's breakdown: the last process, scenario by scenario.
		"where crio-1.36's parallel catalog (100.0s, 4 processes) went: floor 50.0s (longest storm-add-hang 36.0s; CPU 100.0s / 2 cores = 50.0s)",
		"  process 1  storm-add-hang                     60.0s  alone   36.0s  waiting for a core   24.0s",
		"  process 1  (all)                              80.0s  alone   54.0s  waiting for a core   26.0s",
	)
	if strings.Contains(got, "where containerd-2.4's") {
		t.Errorf("a runtime that met its targets gets a breakdown:\n%s", got)
	}
}

// A sweep prints each --procs's time and the fastest that changed no
// verdict.
func TestSweepNamesTheFastestWithTheSameVerdicts(t *testing.T) {
	s := sweepRun{runtime: "containerd-2.4", runs: []catalogRun{
		run("containerd-2.4", 1, 80, 60, sc("a", "pass", 1, 0)),
		run("containerd-2.4", 2, 50, 60, sc("a", "pass", 1, 1)),
		run("containerd-2.4", 3, 40, 60, sc("a", "fail", 1, 1)),
		run("containerd-2.4", 4, 45, 60, sc("a", "pass", 1, 1)),
	}}
	want := "containerd-2.4 by --procs: 1: 80.0s, 2: 50.0s, 3: 40.0s (verdicts differ: a: verdict pass became fail), 4: 45.0s; fastest that changes no verdict: 4\n"
	if got := s.line(); got != want {
		t.Errorf("got  %swant %s", got, want)
	}
}

// A missed make test target says what its CPU over the cores alone takes,
// from .ci/run's record (cnifault-bench cpu); a record without CPU (before
// it was kept) says nothing of it.
func TestAMissedMakeTestTargetNamesItsCPUFloor(t *testing.T) {
	b := bench{cores: 2}
	b.test = &ciRun{Seconds: 31 * 60, Finished: "2026-12-06T10:00:00Z", Commit: "abc1234", Load: "0.5 0.4 0.3", CPU: 2400, Cores: 2}
	got := b.summary()
	mustContain(t, "summary", got,
		"31m0s, exit status 0; CPU 40m0s (over 2 cores: 20m0s)",
		"target: make test <= 15m0s: 31m0s (missed)\n  its CPU over the cores alone takes 20m0s: missed\n",
	)
	b.test.CPU = 0
	if got := b.summary(); strings.Contains(got, "CPU over the cores alone takes") || strings.Contains(got, "; CPU") {
		t.Errorf("a record without CPU names a floor:\n%s", got)
	}
}

// Without .ci/run's record, the make test target says where to get one.
func TestNoTestRecord(t *testing.T) {
	b := bench{cores: 2}
	if got := b.summary(); !strings.Contains(got, "target: make test <= 15m0s: no record in _output/ci-run.json (run .ci/run)") {
		t.Errorf("summary:\n%s", got)
	}
}

// Two runs agree by the gate's comparison, not only by verdict, leaks and
// reclaim: a live pod's teardown that differs is a difference.
func TestAgreementIsTheGatesComparison(t *testing.T) {
	one := run("containerd-2.4", 1, 80, 60, report.Scenario{ID: "teardown-del-error", Labels: []string{"fault:teardown"}, Verdict: "pass",
		Reclaim: report.ReclaimNotNeeded, Teardown: report.TeardownAfterClear, FaultsFired: []string{"DEL error (step 1)"}})
	par := run("containerd-2.4", 4, 40, 60, one.rep.Scenarios[0])
	if got := agreement(one.rep, par.rep); got != "same" {
		t.Fatalf("the same outcomes: %s", got)
	}
	par.rep.Scenarios[0].Teardown = report.TeardownWhileFaulted
	if got := agreement(one.rep, par.rep); got != "teardown-del-error: teardown after-clear became while-faulted" {
		t.Fatalf("a changed teardown: %q", got)
	}
}

// mustContain fails t for each of wants that got (what names it) lacks.
func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
}
