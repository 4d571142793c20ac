package cni_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// faultFiredTimeout is how long after the call under test the harness waits
// to see its fault fire: the journal line is written before the plugin acts,
// but a runtime keeps working on a call whose client gave up, and may reach
// the plugin only then.
const faultFiredTimeout = 5 * time.Second

// ExpectFaultFired asserts, as a harness check, that the scenario's fault
// took effect within d: a call that failed for any other reason (a missing
// sandbox image, a cgroup error, a runtime that never reached the plugin)
// says nothing about how the runtime handles the fault, so its scenario is
// an error, never a pass or a fail.
func (sc *scenario) ExpectFaultFired(ctx SpecContext, d time.Duration) {
	GinkgoHelper()
	Expect(sc.Checks).NotTo(BeEmpty(), "scenario %s injects no fault the harness can see fire", sc.ID)
	expects := sc.Expectations()
	quiet := NewGomega(func(string, ...int) {})
	fired := quiet.Eventually(func() bool {
		return sc.SeeFired(ctx)
	}).WithContext(ctx).WithTimeout(d).WithPolling(pollInterval).Should(BeTrue())
	Expect(fired).To(BeTrue(), "the injected fault never fired, so the runtime's handling of it was not tested: waited %s for %s (RunPodSandbox: %s)",
		d, strings.Join(expects, ", or "), orNone(sc.Error))
}

func orNone(s string) string {
	if s == "" {
		return "no error"
	}
	return s
}
