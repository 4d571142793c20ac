package cni_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// lacksEntry carries, from a skipped spec to the report, the need its
// catalog labels declare that the runtime or node lacks
// (report.Scenario.Lacks): such a skip never gates.
const lacksEntry = "cnifault.lacks"

// skipLacking skips the spec for a need its labels declare
// (managed-only: report.NeedManaged; needs:<feature>: the feature) that
// the runtime under test, or the node, lacks, with the reason that shows
// it. A skip for anything else is Skip's, and gates.
func skipLacking(need, reason string) {
	AddReportEntry(lacksEntry, need, ReportEntryVisibilityNever)
	Skip(reason)
}

// skipManagedOnlyOnExternal skips a managed-only scenario on an external
// endpoint: it kills, restarts or reconfigures the runtime's process,
// config or bin dir, which the harness does not own there. newScenario
// calls it before anything of the scenario is made; a scenario that
// checks before newScenario skips the same way (skipLacking with
// report.NeedManaged). (A suite-level BeforeEach would say this once, but
// Ginkgo drops root-level setup nodes from the tree once the catalog has
// been previewed, PreviewSpecs, which every run does first.)
func skipManagedOnlyOnExternal() {
	if _, managed := rt.(runtimes.Controllable); !managed && slices.Contains(CurrentSpecReport().Labels(), report.LabelManagedOnly) {
		skipLacking(report.NeedManaged, externalEndpoint)
	}
}

// externalEndpoint is why a managed-only scenario does not run against an
// external endpoint.
const externalEndpoint = "the harness does not control this runtime's process, config or bin dir (external endpoint)"
