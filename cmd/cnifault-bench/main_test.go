package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cnifault/cnifault/fixtures/report"
)

func rep(managed, name string, bringUp, total float64) *report.Report {
	return &report.Report{Runtime: report.Runtime{Managed: managed, Name: name, BringUpSeconds: bringUp}, DurationSeconds: total,
		Scenarios: []report.Scenario{{ID: "storm-add-hang", Labels: []string{report.LabelStorm}, DurationSeconds: 7}, {ID: "sustained-add-hang", Labels: []string{report.LabelSustained}, DurationSeconds: 5}, {ID: "add-error", DurationSeconds: 0.5}}}
}

// The summary names each runtime's bring-up and catalog time (the run
// without its bring-up), both walls, and whether the targets were met,
// judging the catalog target on containerd runtimes only.
func TestSummary(t *testing.T) {
	serial := matrixRun{name: "serial", jobs: 1, wall: 200 * time.Second, reports: []*report.Report{
		rep("crio-1.34", "cri-o", 5, 60), rep("containerd-2.4", "containerd", 2.5, 21), rep("containerd-1.6", "containerd", 1.5, 19.5),
	}}
	side := matrixRun{name: "side-by-side", jobs: 2, wall: 150 * time.Second, reports: []*report.Report{
		rep("containerd-1.6", "containerd", 2, 25), rep("containerd-2.4", "containerd", 3, 30),
	}}
	got := summary([]matrixRun{serial, side})
	for _, want := range []string{
		"containerd-1.6        1.5s     18.0s            12.0s     19.5s           25.0s",
		"containerd-2.4        2.5s     18.5s            12.0s     21.0s           30.0s",
		"crio-1.34             5.0s     55.0s            12.0s     60.0s               -",
		"matrix serial        3 runtimes, 1 at once: 3m20s wall",
		"matrix side-by-side  2 runtimes, 2 at once: 2m30s wall",
		"target: a containerd catalog without storm and sustained <= 20s: slowest containerd-2.4, 6.5s (met)",
		"target: a containerd catalog <= 1m0s: slowest containerd-2.4, 18.5s (met)",
		"target: the whole matrix <= 4m0s wall: side by side 2m30s (met)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "containerd-1.6") > strings.Index(got, "crio-1.34") {
		t.Errorf("runtimes are not in name order:\n%s", got)
	}
	side.wall = 5 * time.Minute
	if got := summary([]matrixRun{serial, side}); !strings.Contains(got, "side by side 5m0s (missed)") {
		t.Errorf("a missed target is not said:\n%s", got)
	}
}
