package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

var live = cli.NewProgress(stdout)

// registerProgress adds the nodes that show each scenario as it runs. It is
// called just before RunSpecs, not at package level: Ginkgo's PreviewSpecs
// (the catalog, read first) rebuilds the suite from its top-level containers
// and suite nodes only, so a top-level ReportBeforeEach declared with
// `var _ =` is silently gone by the time the specs run.
//
// A process of a parallel run (--procs) first claims each scenario from the
// run (fixtures/cli procs_plan.go), in a setup node before any other, and
// skips the ones another process has; it shows a scenario once it has it.
func registerProgress() {
	ReportBeforeEach(func(s SpecReport) {
		if s.State.Is(types.SpecStateSkipped|types.SpecStatePending) || tc.Child != nil {
			return
		}
		live.Start(verdict.ScenarioID(s.Labels()))
	})
	if tc.Child != nil {
		BeforeEach(func() {
			id := verdict.ScenarioID(CurrentSpecReport().Labels())
			if !tc.Claim(id) {
				Skip(cli.ClaimedElsewhere)
			}
			live.Start(id)
			tc.Events().Start(id)
		})
	}
	ReportAfterEach(func(s SpecReport) {
		if s.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
		id, v := verdict.ScenarioID(s.Labels()), verdict.Classify(specOf(s), "")
		live.End(id, v, s.RunTime)
		tc.Events().End(id, v, s.RunTime)
	})
}

// Longest first: every scenario's node gets the priority its labels'
// expected time gives it (cli.ExpectedSeconds; in kubelet mode with its
// kubelet run's, kubeletCase.expectedSeconds), so that the long ones
// never start last, in one process or in a parallel run's, where each
// process takes the longest scenario nobody has when it is free. A
// transformer of Ginkgo's tree construction, so that a scenario's
// declaration stays its id and labels.
func init() {
	AddTreeConstructionNodeArgsTransformer(func(nodeType types.NodeType, _ Offset, text string, args []any) (string, []any, []error) {
		var labels []string
		for _, a := range args {
			switch v := a.(type) {
			case Labels:
				labels = append(labels, v...)
			case SpecPriority:
				return text, args, nil // one of its own
			}
		}
		if verdict.ScenarioID(labels) == "" || !nodeType.Is(types.NodeTypeContainer|types.NodeTypeIt) {
			return text, args, nil
		}
		seconds := cli.ExpectedSeconds(verdict.OtherLabels(labels))
		if tc.Kubelet {
			if kc, ok := kubeletCaseOf(verdict.ScenarioID(labels)); ok {
				seconds += kc.expectedSeconds()
			}
		}
		return text, append(args, SpecPriority(int(seconds*10))), nil
	})
}
