package cni_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
)

// Report entries carry results from specs to the suite report; they cross
// parallel processes as JSON.
const (
	runtimeEntry  = "cnifault.runtime"
	pluginsEntry  = "cnifault.cni-plugins"
	scenarioEntry = "cnifault.scenario"
	verdictEntry  = "cnifault.verdict"
)

// record adds the scenario's result to the spec report, with diagnostics
// when the spec did not pass. It runs after the spec, before restore.
func (sc *scenario) record() {
	res := report.Scenario{ID: sc.ID, Description: sc.Description, Error: sc.runErr,
		Leaks: reportLeaks(sc.leaks), Reclaim: sc.reclaimState, ReclaimLeaks: reportLeaks(sc.reclaimLeaks),
		ReclaimError: sc.reclaimErr, DelAfterFailedAdd: sc.delAfterAdd, FaultsFired: sc.faultsFired()}
	if entries, err := cniconf.ReadJournal(sc.journalPath()); err == nil {
		for _, e := range entries {
			GinkgoWriter.Printf("cni-fault: %s %-6s %s action=%s step=%d pid=%d\n",
				e.Time.Format("15:04:05.000"), e.Verb, report.Short(e.ContainerID), e.Action, e.Step, e.PID)
		}
	}
	if CurrentSpecReport().Failed() && tc.ReportDir != "" {
		res.Artifacts = sc.collectDiagnostics()
	}
	AddReportEntry(scenarioEntry, res, ReportEntryVisibilityNever)
}

// collectDiagnostics writes what a reader needs to understand a fail or an
// error: the runtime log since the scenario began, the conflist, the links,
// the instance's mounts and both inventories.
func (sc *scenario) collectDiagnostics() string {
	rel := filepath.Join("artifacts", sc.ID)
	dir := filepath.Join(tc.ReportDir, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	write := func(name string, content []byte) {
		_ = os.WriteFile(filepath.Join(dir, name), content, 0o644)
	}
	write("runtime.log", []byte(rt.LogSince(sc.logOffset)))
	if sc.conflist != nil {
		write(confFile, sc.conflist)
	}
	if journal, err := os.ReadFile(sc.journalPath()); err == nil {
		write("fault-journal.jsonl", journal)
	}
	links, _ := exec.Command("ip", "-d", "link", "show").CombinedOutput()
	write("ip-link.txt", links)
	var lines []string
	if ms, err := host.MountsUnder(rt.Inventory().MountRoots...); err == nil {
		for _, m := range ms {
			lines = append(lines, m.Line)
		}
	}
	write("mountinfo.txt", []byte(strings.Join(lines, "\n")+"\n"))
	for name, snap := range map[string]any{"inventory-before.json": sc.baseline, "inventory-after.json": sc.after,
		"inventory-after-reclaim.json": sc.afterReclaim} {
		raw, _ := json.MarshalIndent(snap, "", "  ")
		write(name, raw)
	}
	return rel
}

func reportLeaks(rs []inspect.Resource) []report.Leak {
	var out []report.Leak
	for _, l := range rs {
		out = append(out, report.Leak{Kind: l.Kind, ID: l.ID, Detail: l.Detail, Owner: l.Owner})
	}
	return out
}

var _ = ReportAfterSuite("cnifault report", func(r Report) {
	if previewing {
		return
	}
	rep := buildReport(r)
	rep.Host = report.ProbeHost()
	rep.Command = report.CommandLine(os.Args...)
	if tc.KnownFailures != "" {
		known, err := report.LoadKnownFailures(tc.KnownFailures)
		if err != nil {
			rep.HarnessError = strings.TrimPrefix(rep.HarnessError+"; ", "; ") + "known failures: " + err.Error()
		} else {
			known.Apply(rep)
		}
	}
	exitCode = rep.ExitCode()
	out := os.Stdout
	fmt.Fprintf(out, "\ncnifault: %s %s (%s)\n", rep.Runtime.Managed, rep.Runtime.Version, rep.Runtime.Endpoint)
	if rep.HarnessError != "" {
		fmt.Fprintf(out, "HARNESS ERROR: %s\n", rep.HarnessError)
	}
	for _, s := range rep.Scenarios {
		fmt.Fprintln(out, s.Line())
	}
	fmt.Fprintf(out, "total %.1fs, exit status %d\n", rep.DurationSeconds, exitCode)
	if tc.ReportDir == "" {
		return
	}
	dir := absPath(tc.ReportDir)
	paths, err := rep.WriteAll(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "writing report: %v\n", err)
		exitCode = report.ExitHarness
		return
	}
	path := strings.Join(paths, "\n        ")
	junit := filepath.Join(dir, "junit.xml")
	if err := reporters.GenerateJUnitReport(r, junit); err != nil {
		fmt.Fprintf(os.Stderr, "writing junit: %v\n", err)
		exitCode = report.ExitHarness
	}
	fmt.Fprintf(out, "report: %s\njunit:  %s\n", path, junit)
})

// buildReport turns Ginkgo's suite report into report.json.
func buildReport(r Report) *report.Report {
	rep := &report.Report{
		Schema:          report.Schema,
		StartedAt:       r.StartTime.UTC().Format(time.RFC3339),
		DurationSeconds: r.RunTime.Seconds(),
	}
	var harness []string
	for _, s := range r.SpecReports {
		if s.LeafNodeType.Is(types.NodeTypeBeforeSuite | types.NodeTypeSynchronizedBeforeSuite) {
			decodeEntry(s, runtimeEntry, &rep.Runtime)
			decodeEntry(s, pluginsEntry, &rep.CNIPlugins)
		}
		if s.LeafNodeType.Is(types.NodeTypesForSuiteLevelNodes) && s.State.Is(types.SpecStateFailureStates) {
			harness = append(harness, fmt.Sprintf("%s: %s", s.LeafNodeType, s.Failure.Message))
		}
	}
	rep.HarnessError = strings.Join(harness, "; ")
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		res := report.Scenario{}
		decodeEntry(s, scenarioEntry, &res)
		if res.ID == "" {
			res.ID = labelID(s.Labels())
			res.Description = s.LeafNodeText
		}
		res.DurationSeconds = s.RunTime.Seconds()
		res.Verdict = verdict(s, rep.HarnessError)
		if res.Verdict == report.Skipped {
			res.Reason = s.Failure.Message
		}
		if res.Verdict == report.Fail || res.Verdict == report.Error {
			res.Failure = failureText(s)
			if res.Failure == "" {
				res.Failure = rep.HarnessError
			}
		}
		rep.Scenarios = append(rep.Scenarios, res)
	}
	// Specs run in random order; reports list scenarios by id so that two
	// reports compare line by line.
	sort.Slice(rep.Scenarios, func(a, b int) bool { return rep.Scenarios[a].ID < rep.Scenarios[b].ID })
	return rep
}

// verdict classifies a spec: only a failure raised through contract is a
// fail; every other failure, timeout or interruption is an error.
func verdict(s types.SpecReport, harnessError string) string {
	switch {
	case s.State.Is(types.SpecStatePassed):
		return report.Pass
	case s.State.Is(types.SpecStateSkipped | types.SpecStatePending):
		if harnessError != "" {
			return report.Error
		}
		return report.Skipped
	}
	var v string
	decodeEntry(s, verdictEntry, &v)
	if v == report.Fail {
		return report.Fail
	}
	return report.Error
}

func failureText(s types.SpecReport) string {
	if s.Failure.Message == "" {
		return ""
	}
	return fmt.Sprintf("%s [%s at %s]", s.Failure.Message, s.Failure.FailureNodeType, s.Failure.Location)
}

// decodeEntry reads the first entry called name into v.
func decodeEntry(s types.SpecReport, name string, v any) bool {
	for _, e := range s.ReportEntries {
		if e.Name != name {
			continue
		}
		// In the process that added it the entry holds the Go value; across
		// parallel processes it arrives as JSON.
		raw := []byte(e.Value.AsJSON)
		if v := e.Value.GetRawValue(); v != nil {
			var err error
			if raw, err = json.Marshal(v); err != nil {
				return false
			}
		}
		return json.Unmarshal(raw, v) == nil
	}
	return false
}

func labelID(labels []string) string {
	for _, l := range labels {
		if id, ok := strings.CutPrefix(l, scenarioLabelPrefix); ok {
			return id
		}
	}
	return ""
}

func otherLabels(all []string) []string {
	var out []string
	for _, l := range all {
		if !strings.HasPrefix(l, scenarioLabelPrefix) {
			out = append(out, l)
		}
	}
	return out
}
