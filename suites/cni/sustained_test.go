package cni_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// sustainedHangDeadline is the client deadline of each attempt while ADD
// hangs, from the moment it hangs: shorter than hangDeadline, since every
// attempt waits it out (an attempt the runtime holds before ADD waits
// scn.HangReach); and sustainedSettleWindow is how long what the runtime
// still cleans up after an abandoned attempt gets to go before the next
// attempt counts it: kubelet's shortest backoff, when its next attempt
// would come.
var sustainedHangDeadline = scn.PastHang(cniconf.VerbAdd, 1500*time.Millisecond)

const sustainedSettleWindow = 10 * time.Second

// sustainedCase is how each attempt of a sustained scenario fails.
type sustainedCase struct {
	deadline scn.Deadline
	// settle, where set, is how long what the runtime still cleans up after
	// an attempt its client gave up on may take to go.
	settle time.Duration
}

// The fault does not clear, and kubelet retries the pod every 10–15 s
// for as long as it exists: each retry a new sandbox (the attempt number
// raised), the failed one stopped and removed. A leak that one failure
// leaves is a nuisance; one that grows with every retry drains the node —
// a /24 in under an hour at one address per retry.
var _ = Describe("A pod retried as kubelet retries it", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	When("a later plugin fails ADD and DEL on every attempt", Scenario("sustained-partial-add-del-fails"), Label("fault:sustained"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: error, DEL: error, always)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().
				On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error")))
		}, NodeTimeout(scenarioSetupTimeout))
		itDoesNotLeakMorePerAttempt(current, sustainedCase{deadline: scn.Within(criCallTimeout)})
	})

	When("ADD hangs past the client's deadline on every attempt", Scenario("sustained-add-hang"), Label("fault:sustained", "fault:hang"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: hang, always)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().On(cniconf.VerbAdd, cniconf.Hang()))
		}, NodeTimeout(scenarioSetupTimeout))
		itDoesNotLeakMorePerAttempt(current, sustainedCase{deadline: sustainedHangDeadline, settle: sustainedSettleWindow})
	})
})

// itDoesNotLeakMorePerAttempt retries the scenario's pod tc.SustainedAttempts
// times under the fault, kubelet's Stop and Remove of the failed sandbox
// after each, and counts what is left after each: no kind may grow with
// the attempts.
func itDoesNotLeakMorePerAttempt(current func() *scenario, su sustainedCase) {
	It("leaves no more after each attempt than after the first", func(ctx SpecContext) {
		sc := current()
		var per []report.AttemptLeaks
		var first map[string]int
		for attempt := range tc.SustainedAttempts {
			By(fmt.Sprintf("attempt %d: running the pod, then stopping and removing its failed sandbox", attempt+1))
			errs := sc.RunPodsAtOnceE(ctx, su.deadline, uint32(attempt), []int{0})
			if attempt == 0 {
				sc.ExpectFaultFired(ctx, faultFiredTimeout)
			}
			contract.Expect(errs[0]).To(HaveOccurred(), "RunPodSandbox succeeded despite the fault (attempt %d)", attempt+1)
			// Kubelet's next sync stops the pod's sandboxes once; its
			// container GC removes the dead ones.
			if err := sc.StopAndRemoveLeftovers(ctx); err != nil {
				GinkgoWriter.Printf("kubelet's teardown: %v\n", err)
			}
			// After the first attempt, what the runtime still cleans up
			// gets its window to go down to the first attempt's level.
			counts := sc.settledCounts(ctx, su.settle, first)
			if attempt == 0 {
				first = counts
			}
			per = append(per, report.AttemptLeaks{Attempt: attempt + 1, Leaks: counts})
			GinkgoWriter.Printf("after attempt %d: %v\n", attempt+1, counts)
		}
		s := report.NewSustained(per, sc.Network.Subnet)
		sc.Sustained = &s
		contract.Expect(sustainedReport{sc.ID, s}).To(NotGrowWithAttempts())
	}, SpecTimeout(scenarioTimeout))
}
