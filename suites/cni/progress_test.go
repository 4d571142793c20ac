package cni_test

import (
	"os"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

var live = cli.NewProgress(os.Stdout)

// registerProgress adds the nodes that show each scenario as it runs. It is
// called just before RunSpecs, not at package level: Ginkgo's PreviewSpecs
// (the catalog, read first) rebuilds the suite from its top-level containers
// and suite nodes only, so a top-level ReportBeforeEach declared with
// `var _ =` is silently gone by the time the specs run.
func registerProgress() {
	ReportBeforeEach(func(s SpecReport) {
		if s.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
		live.Start(verdict.ScenarioID(s.Labels()))
		tc.Events().Start(verdict.ScenarioID(s.Labels()))
	})
	ReportAfterEach(func(s SpecReport) {
		if s.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
		id, v := verdict.ScenarioID(s.Labels()), verdict.Classify(specOf(s), "")
		live.End(id, v, s.RunTime)
		tc.Events().End(id, v, s.RunTime)
	})
}
