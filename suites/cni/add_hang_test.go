package cni_test

import (
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

// hangSettleWindow is how long after the deadline the runtime may take to
// finish its own cleanup before a leftover counts as a leak: a runtime
// keeps working on a call whose client gave up. hangSettles are the
// inventories over it, at least scn.MinRounds however long each takes;
// hangRetries kubelet's retries of the pod over it.
const hangSettleWindow = 15 * time.Second

var (
	hangSettles = scn.Rounds{Span: hangSettleWindow, Interval: 250 * time.Millisecond, Min: scn.MinRounds}
	hangRetries = scn.Rounds{Span: hangSettleWindow, Interval: time.Second, Min: scn.MinRounds}
)

// leaksSettle inventories the instance over hangSettles until it holds no
// leak, and returns the last inventory's. Where what is left is held by a
// hung ADD that the runtime keeps past the window (CRI-O: scn.HeldByHang),
// the window ends at once with the inventory it would end with, and held
// says why; elsewhere held is "".
func (sc *scenario) leaksSettle(ctx SpecContext) (left leakReport, held string) {
	GinkgoHelper()
	pollRounds(ctx, hangSettles, hangSettles.Bound(inventoryBound), func() bool {
		left = sc.Leaks(ctx)
		if len(left.Leaks) == 0 {
			return true
		}
		held = sc.HeldByHang(hangSettleWindow)
		return held != ""
	})
	return left, held
}

var _ = Describe("RunPodSandbox", func() {
	var sc *scenario

	When("ADD hangs past the client's deadline", KubeletScenario("add-hang-deadline", kubeletCase{
		family: kubeletFirstAttempt, hang: true, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
		},
	}), Label("fault:hang"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: hang once, then pass)")
			sc.InstallHangingAdd(ctx)
		}, NodeTimeout(scenarioSetupTimeout))

		itLeavesNothingPastTheHang(func() *scenario { return sc })
	})
})

// itLeavesNothingPastTheHang declares the contract of an ADD that hangs
// once past the client's deadline (the install's fault): the call fails,
// the runtime cleans up within the settle window, and the same pod starts
// once ADD passes.
func itLeavesNothingPastTheHang(current func() *scenario) {
	It("leaves nothing within the settle window and accepts the same pod again", func(ctx SpecContext) {
		sc := current()
		By("running a pod sandbox with a short deadline")
		_, err := sc.RunSandboxWithin(ctx, hangDeadline)

		By("checking that ADD hung")
		sc.ExpectFaultFired(ctx, faultFiredTimeout)
		contract.Expect(err).To(HaveOccurred(), "RunPodSandbox returned although ADD hangs")

		By("waiting for the runtime to clean up within the settle window")
		left, held := sc.leaksSettle(ctx)
		var why []any
		if held != "" {
			why = []any{"%s: none of it can go within the %s settle window", held, hangSettleWindow}
		}
		contract.Expect(left).To(BeClean(), why...)

		By("running the same pod again now that ADD passes")
		pollRounds(ctx, hangRetries, hangRetries.Bound(criCallTimeout), func() bool {
			_, err = sc.RunSandboxE(ctx)
			return err == nil
		})
		sc.expectStartedAgain(ctx, err, "the same pod's retry once ADD passes (a sandbox name reserved by the abandoned call refuses it)")
	}, SpecTimeout(scenarioTimeout))
}
