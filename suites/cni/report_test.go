package cni_test

import (
	"encoding/json"
	"fmt"
	"os"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/verdict"
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
	res := sc.Finish()
	for _, line := range sc.JournalLines() {
		GinkgoWriter.Println(line)
	}
	if CurrentSpecReport().Failed() && tc.ReportDir != "" {
		res.Artifacts = sc.CollectDiagnostics(tc.ReportDir)
	}
	AddReportEntry(scenarioEntry, res, ReportEntryVisibilityNever)
}

// The report is built, published and turned into the exit status by
// fixtures/verdict; the suite only adds what this node and command line
// are, and Ginkgo's own JUnit report.
var _ = ReportAfterSuite("cnifault report", func(r Report) {
	if previewing {
		return
	}
	rep := verdict.Build(suiteOf(r))
	rep.Host = report.ProbeHost()
	rep.Command = report.CommandLine(os.Args...)
	rep.Processes, rep.Serial = 1, tc.SerialReason()
	exitCode = verdict.Publish(rep, verdict.Publication{
		Stdout: stdout, Stderr: os.Stderr,
		KnownFailures: tc.KnownFailures, RequireCoverage: tc.RequireCoverage, ReportDir: tc.ReportDir,
		Shipped: cli.ShippedExpectations(),
		JUnit:   func(path string) error { return reporters.GenerateJUnitReport(r, path) },
	})
})

// suiteOf is Ginkgo's suite report as the verdicts need it.
func suiteOf(r Report) verdict.Suite {
	out := verdict.Suite{StartTime: r.StartTime, RunTime: r.RunTime, Harness: &tc.Harness}
	for _, s := range r.SpecReports {
		if s.LeafNodeType.Is(types.NodeTypeBeforeSuite | types.NodeTypeSynchronizedBeforeSuite) {
			decodeEntry(s, runtimeEntry, &out.Runtime)
			decodeEntry(s, pluginsEntry, &out.CNIPlugins)
		}
		if s.LeafNodeType.Is(types.NodeTypesForSuiteLevelNodes) && s.State.Is(types.SpecStateFailureStates) {
			out.SuiteFailures = append(out.SuiteFailures, fmt.Sprintf("%s: %s", s.LeafNodeType, s.Failure.Message))
		}
		if s.LeafNodeType == types.NodeTypeIt {
			out.Specs = append(out.Specs, specOf(s))
		}
	}
	return out
}

// specOf is one spec's report as its verdict needs it: how it ended, and
// whether the contract raised its failure.
func specOf(s types.SpecReport) verdict.Spec {
	spec := verdict.Spec{
		Labels:  s.Labels(),
		Text:    s.LeafNodeText,
		Message: s.Failure.Message,
		Where:   fmt.Sprintf("%s at %s", s.Failure.FailureNodeType, s.Failure.Location),
		RunTime: s.RunTime,
	}
	switch {
	case s.State.Is(types.SpecStatePassed):
		spec.State = verdict.Passed
	case s.State.Is(types.SpecStateSkipped | types.SpecStatePending):
		spec.State = verdict.Skipped
	default:
		spec.State = verdict.Failed
	}
	var v string
	spec.Contract = decodeEntry(s, verdictEntry, &v) && v == report.Fail
	spec.Interrupted = s.State.Is(types.SpecStateInterrupted)
	var recorded report.Scenario
	if decodeEntry(s, scenarioEntry, &recorded) {
		spec.Recorded = &recorded
	}
	decodeEntry(s, lacksEntry, &spec.Lacks)
	var run report.KubeletRun
	if decodeEntry(s, kubeletEntry, &run) {
		spec.Kubelet = &run
	}
	return spec
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
