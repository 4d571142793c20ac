package main

import (
	"path/filepath"
	"testing"

	"github.com/cnifault/cnifault/fixtures/report"
)

func write(t *testing.T, verdict string) string {
	t.Helper()
	r := &report.Report{Runtime: report.Runtime{Name: "containerd", Managed: "containerd-2.4"},
		Scenarios: []report.Scenario{{ID: "add-error", Verdict: verdict}}}
	p, err := r.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitStatus(t *testing.T) {
	pass1, pass2, errored := write(t, report.Pass), write(t, report.Pass), write(t, report.Error)
	for _, c := range []struct {
		name  string
		paths []string
		want  int
	}{
		{"identical runs", []string{pass1, pass2}, report.ExitPass},
		{"a verdict changed", []string{pass1, errored, pass2}, report.ExitFail},
		{"an unreadable report", []string{pass1, filepath.Join(t.TempDir(), "report.json")}, report.ExitHarness},
		{"no report", nil, report.ExitHarness},
	} {
		if got := run(c.paths); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}
