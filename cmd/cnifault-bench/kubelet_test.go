package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnifault/cnifault/fixtures/report"
)

func writeRunReport(t *testing.T, dir string, r *report.Report) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
}

func TestTheBenchReadsKubeletModesTimePerRuntime(t *testing.T) {
	root := t.TempDir()
	yes, no := true, false
	writeRunReport(t, filepath.Join(root, "containerd-2.4"), &report.Report{Schema: report.Schema, DurationSeconds: 86,
		Runtime: report.Runtime{Name: "containerd", Version: "v2.4.2"},
		Scenarios: []report.Scenario{
			{ID: "partial-add-del-fails", Verdict: report.XFail, DurationSeconds: 22.6, KubeletRun: &report.KubeletRun{Outcome: report.KubeletRemoved, Agrees: &yes}},
			{ID: "teardown-del-error", Verdict: report.Pass, DurationSeconds: 84, KubeletRun: &report.KubeletRun{Outcome: report.KubeletRemoved, Agrees: &no}},
			{ID: "no-cni-config", Verdict: report.Pass, DurationSeconds: 36, KubeletRun: &report.KubeletRun{Outcome: report.KubeletNeverAttempted}},
			{ID: "healthy-network", Verdict: report.Skipped},
		}})
	if err := os.MkdirAll(filepath.Join(root, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	sv := &svTimes{specs: []specTime{{text: "Kubelet mode gives …", labels: []string{"kubelet"}, d: 6 * time.Minute}}}
	got := kubeletSummary(readKubeletChecks(root), sv)
	for _, want := range []string{
		"kubelet mode on broken: no report",
		"kubelet mode on containerd-2.4 (containerd v2.4.2): 1m26s, exit status 0; partial-add-del-fails 23s (removed, agrees), teardown-del-error 1m24s (removed, DISAGREES), no-cni-config 36s (never-attempted, not compared)\n",
		"make test's kubelet mode (containerd-2.4): 6m0s, target at most 5m0s: MISSED",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "healthy-network") {
		t.Errorf("a scenario without a kubelet run is listed:\n%s", got)
	}
	if got := kubeletSummary(nil, nil); !strings.Contains(got, "no make kubelet-check report") {
		t.Errorf("without reports: %q", got)
	}
}
