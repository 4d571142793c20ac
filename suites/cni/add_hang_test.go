package cni_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// The client's deadline while a plugin hangs: kubelet's
// runtime-request-timeout running out, compressed in time. Each counts from
// the moment the pod's invocation began to hang (scn.PastHang), never from
// the call, so that a runtime slowed by the machine's load still meets the
// fault before the deadline: exceeding it is the behaviour judged.
var (
	// hangDeadline is the deadline of a RunPodSandbox whose ADD hangs.
	hangDeadline = scn.PastHang(cniconf.VerbAdd, 3*time.Second)
	// repeatHangDeadline is the deadline of scenarios that wait out a hang
	// more than once (a storm's two rounds, a teardown's retries).
	repeatHangDeadline = scn.PastHang(cniconf.VerbAdd, 2*time.Second)
)

const (
	// hangSettleWindow is how long after the deadline the runtime may take
	// to finish its own cleanup before a leftover counts as a leak: a
	// runtime keeps working on a call whose client gave up.
	hangSettleWindow = 15 * time.Second
)

var _ = Describe("RunPodSandbox", func() {
	var sc *scenario

	When("ADD hangs past the client's deadline", Scenario("add-hang-deadline"), Label("fault:hang"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: hang once, then pass)")
			sc.InstallHangingAdd(ctx)
		}, NodeTimeout(scenarioSetupTimeout))

		It("leaves nothing within the settle window and accepts the same pod again", func(ctx SpecContext) {
			By("running a pod sandbox with a short deadline")
			_, err := sc.RunSandboxWithin(ctx, hangDeadline)

			By("checking that ADD hung")
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			contract.Expect(err).To(HaveOccurred(), "RunPodSandbox returned although ADD hangs")

			By("waiting for the runtime to clean up within the settle window")
			contract.Eventually(func(g Gomega) {
				left := sc.Leaks(ctx)
				// What a call held by a hung ADD made cannot go before
				// the window ends (CRI-O): judge it now, as the window's
				// end would.
				if why := sc.HeldByHang(hangSettleWindow); why != "" && len(left.Leaks) > 0 {
					StopTrying(fmt.Sprintf("%s\n(%s: none of it can go within the %s settle window)",
						BeClean().FailureMessage(left), why, hangSettleWindow)).Now()
				}
				g.Expect(left).To(BeClean())
			}).WithContext(ctx).WithTimeout(hangSettleWindow).WithPolling(250 * time.Millisecond).Should(Succeed())

			By("running the same pod again now that ADD passes")
			quiet := NewGomega(func(string, ...int) {})
			quiet.Eventually(func() error {
				_, err = sc.RunSandboxE(ctx)
				return err
			}).WithContext(ctx).WithTimeout(hangSettleWindow).WithPolling(time.Second).Should(Succeed())
			sc.expectStartedAgain(ctx, err, "the same pod's retry once ADD passes (a sandbox name reserved by the abandoned call refuses it)")
		}, SpecTimeout(scenarioTimeout))
	})
})
