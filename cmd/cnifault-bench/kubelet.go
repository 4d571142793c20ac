package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cnifault/cnifault/fixtures/report"
)

// kubeletCheckRecord is where make kubelet-check leaves each runtime's
// report (hack/kubelet-check.sh): kubelet mode's time per runtime is read
// from there, not run again (a stuck-terminating pod waits out kubelet's
// GC twice: minutes per runtime).
const kubeletCheckRecord = "_output/kubelet-check"

// kubeletSpecTarget is what kubelet mode may add to make test (issue 35):
// the self-validation's spec labelled kubelet.
const kubeletSpecTarget = 5 * time.Minute

// kubeletCheck is one runtime's kubelet-mode report.
type kubeletCheck struct {
	dir string
	rep *report.Report
	err error
}

// readKubeletChecks reads every runtime's report under dir, in name order.
func readKubeletChecks(dir string) []kubeletCheck {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []kubeletCheck
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		rep, err := report.Read(filepath.Join(dir, e.Name(), "report.json"))
		out = append(out, kubeletCheck{dir: e.Name(), rep: rep, err: err})
	}
	return out
}

// kubeletSummary is kubelet mode's time per runtime, each covered
// scenario's with its outcome and whether it agreed, and the
// self-validation's kubelet-mode spec against its target.
func kubeletSummary(checks []kubeletCheck, sv *svTimes) string {
	var w strings.Builder
	if len(checks) == 0 {
		fmt.Fprintf(&w, "kubelet mode: no make kubelet-check report in %s\n", kubeletCheckRecord)
	}
	for _, c := range checks {
		if c.err != nil {
			fmt.Fprintf(&w, "kubelet mode on %s: no report (%v)\n", c.dir, c.err)
			continue
		}
		r := c.rep
		fmt.Fprintf(&w, "kubelet mode on %s (%s %s): %s, exit status %d", c.dir, r.Runtime.Name, r.Runtime.Version,
			(time.Duration(r.DurationSeconds * float64(time.Second))).Round(time.Second), r.ExitStatus)
		var parts []string
		for _, s := range r.Scenarios {
			k := s.KubeletRun
			if k == nil {
				continue
			}
			p := fmt.Sprintf("%s %s", s.ID, (time.Duration(s.DurationSeconds * float64(time.Second))).Round(time.Second))
			switch {
			case k.Error != "":
				p += " (not judged)"
			case k.Agrees != nil && *k.Agrees:
				p += fmt.Sprintf(" (%s, agrees)", k.Outcome)
			case k.Agrees == nil:
				// Kubelet never made the scenario's call (verdict.JudgeKubelet).
				p += fmt.Sprintf(" (%s, not compared)", k.Outcome)
			default:
				p += fmt.Sprintf(" (%s, DISAGREES)", k.Outcome)
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			fmt.Fprintf(&w, "; %s", strings.Join(parts, ", "))
		}
		w.WriteString("\n")
	}
	if sv == nil {
		return w.String()
	}
	var d time.Duration
	found := false
	for _, s := range sv.specs {
		if slices.Contains(s.labels, "kubelet") {
			d, found = d+s.d, true
		}
	}
	if !found {
		fmt.Fprintf(&w, "make test's kubelet mode: no spec labelled kubelet in %s\n", selfValidationRecord)
		return w.String()
	}
	verdict := "met"
	if d > kubeletSpecTarget {
		verdict = "MISSED"
	}
	fmt.Fprintf(&w, "make test's kubelet mode (containerd-2.4): %s, target at most %s: %s\n", d.Round(time.Second), kubeletSpecTarget, verdict)
	return w.String()
}
