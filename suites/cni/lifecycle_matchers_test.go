package cni_test

import (
	"fmt"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/cnifault/cnifault/fixtures/report"
)

// stormReport is a storm's result as the contract judges it.
type stormReport struct {
	Scenario string
	Storm    report.Storm
}

// LeaveWhatSingleFailuresLeave succeeds when a storm left, kind by kind,
// exactly its pod count times what one failure leaves: an extra leak or a
// missing one is a race the single scenario cannot show.
func LeaveWhatSingleFailuresLeave() types.GomegaMatcher { return proportional{} }

type proportional struct{}

func (proportional) Match(actual any) (bool, error) {
	r, ok := actual.(stormReport)
	if !ok {
		return false, fmt.Errorf("LeaveWhatSingleFailuresLeave expects a stormReport, got %T", actual)
	}
	return len(r.Storm.NotProportional) == 0, nil
}

func (proportional) FailureMessage(actual any) string {
	r := actual.(stormReport)
	return fmt.Sprintf("scenario %s: %d pods failing at once did not leave %d times what one failure leaves:\n  %s",
		r.Scenario, r.Storm.Pods, r.Storm.Pods, strings.Join(r.Storm.NotProportional, "\n  "))
}

func (proportional) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("scenario %s: the storm left what its single failures leave", actual.(stormReport).Scenario)
}

// sustainedReport is a sustained failure's result as the contract judges
// it.
type sustainedReport struct {
	Scenario  string
	Sustained report.Sustained
}

// NotGrowWithAttempts succeeds when kubelet could retry the pod and no kind
// of leak grows with its attempts; its failure names the rate and what it
// drains, or the Stops that kept the pod stuck.
func NotGrowWithAttempts() types.GomegaMatcher { return notGrow{} }

type notGrow struct{}

func (notGrow) Match(actual any) (bool, error) {
	r, ok := actual.(sustainedReport)
	if !ok {
		return false, fmt.Errorf("NotGrowWithAttempts expects a sustainedReport, got %T", actual)
	}
	return !r.Sustained.Grows() && r.Sustained.Stuck == nil, nil
}

func (notGrow) FailureMessage(actual any) string {
	r := actual.(sustainedReport)
	if r.Sustained.Stuck != nil {
		return fmt.Sprintf("scenario %s: %s; the last Stop: %s", r.Scenario, r.Sustained.Text(), r.Sustained.Stuck.Error)
	}
	return fmt.Sprintf("scenario %s: %s over %d attempts: %s", r.Scenario, r.Sustained.GrowthText(), r.Sustained.Attempts, r.Sustained.Text())
}

func (notGrow) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("scenario %s: no leak grows with attempts", actual.(sustainedReport).Scenario)
}
