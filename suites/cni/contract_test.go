package cni_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
)

// contract is the Gomega for assertions about the runtime's behaviour. Its
// failures make the verdict "fail"; a failure of plain Expect means the
// harness could not run the scenario and makes it "error". Keeping the two
// apart is the harness's first duty.
var contract = NewGomega(func(message string, callerSkip ...int) {
	skip := 0
	if len(callerSkip) > 0 {
		skip = callerSkip[0]
	}
	AddReportEntry(verdictEntry, report.Fail, ReportEntryVisibilityNever)
	Fail(message, skip+1)
})

// leakReport is what one scenario left behind.
type leakReport struct {
	Scenario string
	Leaks    []inspect.Resource
}

// BeClean succeeds when a scenario left nothing behind; its failure message
// names the scenario and every leaked resource with its id or path.
func BeClean() types.GomegaMatcher { return beClean{} }

type beClean struct{}

func (beClean) Match(actual any) (bool, error) {
	r, ok := actual.(leakReport)
	if !ok {
		return false, fmt.Errorf("BeClean expects a leakReport, got %T", actual)
	}
	return len(r.Leaks) == 0, nil
}

func (beClean) FailureMessage(actual any) string {
	r := actual.(leakReport)
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s leaked %d resource(s):", r.Scenario, len(r.Leaks))
	for _, l := range r.Leaks {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	return b.String()
}

func (beClean) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("scenario %s was expected to leak, and left nothing behind", actual.(leakReport).Scenario)
}
