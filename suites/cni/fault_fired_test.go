package cni_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// faultFiredTimeout is how long after the call under test the harness waits
// to see its fault fire: the journal line is written before the plugin acts,
// but a runtime keeps working on a call whose client gave up, and may reach
// the plugin only then.
const faultFiredTimeout = 5 * time.Second

// faultCheck is one way to see the scenario's fault take effect: it returns
// what fired, for the report, once it has.
type faultCheck struct {
	// expects is what the harness waits to see, for the error message.
	expects string
	seen    func(ctx context.Context) (fired string, ok bool)
}

// expectFault registers a way the scenario's fault may be seen to fire. The
// install helpers register what they inject; a scenario may add a check
// for a fault the harness injects through config rather than cni-fault.
func (sc *scenario) expectFault(expects string, seen func(ctx context.Context) (string, bool)) {
	sc.checks = append(sc.checks, faultCheck{expects: expects, seen: seen})
}

// expectJournal is the check of a cni-fault entry of the installed chain:
// the journal holds the step of verb v that breaks the call, applied to the
// scenario's pod.
func (sc *scenario) expectJournal(f cniconf.Fault, v cniconf.Verb) {
	idx, step, ok := f.Firing(v)
	if !ok {
		return
	}
	uid := sc.PodConfig().GetMetadata().GetUid()
	sc.expectFault(fmt.Sprintf("cni-fault's journal to show %s %s (step %d) for pod %s", v, step.Action, idx, uid),
		func(context.Context) (string, bool) {
			entries, _ := cniconf.ReadJournal(sc.journalPath())
			return verdict.FiredStep(entries, uid, v, idx, step.Action, sc.runStarted)
		})
}

// ExpectNetworkNotReady is the check of a config fault: the runtime reports
// NetworkReady=false, the state the scenario set up, after the call too.
func (sc *scenario) expectNetworkNotReady() {
	sc.expectFault("the runtime to report NetworkReady=false", func(ctx context.Context) (string, bool) {
		st, err := runtimes.Network(ctx, rt)
		if err != nil || st.Ready {
			return "", false
		}
		return strings.TrimSpace(fmt.Sprintf("NetworkReady=false %s", st.Reason)), true
	})
}

// ExpectRuntimeError registers a fault that only the runtime's own words
// can show, such as a plugin binary that is not installed or an address
// range with nothing free: RunPodSandbox's error, or the runtime's log since
// the scenario began, names it.
func (sc *scenario) ExpectRuntimeError(fragment string) {
	sc.expectFault(fmt.Sprintf("the runtime's error or log to name %q", fragment), func(context.Context) (string, bool) {
		if strings.Contains(sc.runErr, fragment) || strings.Contains(rt.LogSince(sc.logOffset), fragment) {
			return "runtime error: " + fragment, true
		}
		return "", false
	})
}

// ExpectFaultFired asserts, as a harness check, that the scenario's fault
// took effect within d: a call that failed for any other reason (a missing
// sandbox image, a cgroup error, a runtime that never reached the plugin)
// says nothing about how the runtime handles the fault, so its scenario is
// an error, never a pass or a fail.
func (sc *scenario) ExpectFaultFired(ctx SpecContext, d time.Duration) {
	GinkgoHelper()
	Expect(sc.checks).NotTo(BeEmpty(), "scenario %s injects no fault the harness can see fire", sc.ID)
	var expects []string
	for _, c := range sc.checks {
		expects = append(expects, c.expects)
	}
	quiet := NewGomega(func(string, ...int) {})
	fired := quiet.Eventually(func() bool {
		for _, c := range sc.checks {
			if what, ok := c.seen(ctx); ok {
				sc.addFired(what)
				return true
			}
		}
		return false
	}).WithContext(ctx).WithTimeout(d).WithPolling(pollInterval).Should(BeTrue())
	Expect(fired).To(BeTrue(), "the injected fault never fired, so the runtime's handling of it was not tested: waited %s for %s (RunPodSandbox: %s)",
		d, strings.Join(expects, ", or "), orNone(sc.runErr))
}

func (sc *scenario) addFired(what string) {
	if !slices.Contains(sc.fired, what) {
		sc.fired = append(sc.fired, what)
	}
}

// faultsFired is what the report names as fired (verdict.FaultsFired).
func (sc *scenario) faultsFired() []string {
	return verdict.FaultsFired(sc.fired, sc.observed, func() []cniconf.JournalEntry {
		entries, _ := cniconf.ReadJournal(sc.journalPath())
		return entries
	}, sc.PodConfig().GetMetadata().GetUid())
}

func orNone(s string) string {
	if s == "" {
		return "no error"
	}
	return s
}
