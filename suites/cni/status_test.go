package cni_test

import (
	"context"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// statusPollWindow is how long the harness polls CRI Status for the runtime
// to ask STATUS and act on it. containerd 2.x asks on every CRI Status, and
// CRI-O every 500 ms while it polls, so either shows within three polls; a
// runtime asking on a slower timer of its own would be reported as not
// asking. (Kubelet itself polls every 5 s.)
const statusPollWindow = 1500 * time.Millisecond

// statusAnswerDeadline is what kubelet can wait for one CRI Status: it
// polls every 5 s.
const statusAnswerDeadline = 5 * time.Second

// CNI 1.1's STATUS lets a plugin say "not ready for ADD" without the conf
// dir dance. Who asks it differs (docs/how-it-works.md): containerd 2.x
// runs it on every CRI Status for a list of cniVersion 1.1.0 (go-cni
// Status); containerd 1.6 and 1.7 never do (their libcni has no STATUS);
// CRI-O polls it only until it first passes after a start. A runtime that
// does not ask is reported as such (skipped, with the journal's word for
// it): that is a finding, not a harness error.
var _ = Describe("CNI STATUS", func() {
	var sc *scenario
	failStatus := cniconf.Fail(cniconf.CodePluginNotAvailable, "cnifault: injected STATUS error")

	install := func(ctx SpecContext, f cniconf.Fault) {
		sc.InstallStatusNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f).AtVersion(cniconf.CNIVersion110))
		sc.ExpectNodeJournal(f, cniconf.VerbStatus)
	}

	When("STATUS fails", Scenario("status-not-ready"), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (STATUS: error)")
			install(ctx, sc.Fault().On(cniconf.VerbStatus, failStatus))
		}, NodeTimeout(scenarioSetupTimeout))

		It("reports NetworkReady=false, and a RunPodSandbox made anyway leaves nothing if it fails", func(ctx SpecContext) {
			By("polling CRI Status as kubelet does, until the runtime reports NetworkReady=false")
			sc.expectStatusAsked(ctx)
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			contract.Eventually(func(g Gomega) {
				st, err := rt.CRI().Network(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Ready).To(BeFalse(), "NetworkReady stayed true while STATUS failed")
			}).WithContext(ctx).WithTimeout(statusPollWindow).WithPolling(pollInterval).Should(Succeed())

			By("running a pod sandbox anyway, as a client that does not wait would")
			if _, err := sc.RunSandboxWithin(ctx, scn.Within(mayBlockCallTimeout)); err != nil {
				By("inventorying the instance after the failed call")
				contract.Expect(sc.Leaks(ctx)).To(BeClean())
			}
		}, SpecTimeout(scenarioTimeout))
	})

	When("STATUS starts failing after a pod started", Scenario("status-not-ready-teardown"), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (STATUS: pass)")
			install(ctx, sc.Fault())
		}, NodeTimeout(scenarioSetupTimeout))

		// The principle of the change that started this project: cleanup
		// must not depend on the network being ready.
		It("stops and removes that pod while STATUS fails, leaving nothing", func(ctx SpecContext) {
			By("polling CRI Status as kubelet does, to see the runtime ask STATUS")
			sc.expectStatusAsked(ctx)

			By("starting a pod on the ready network")
			id, err := sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
			Expect(err).NotTo(HaveOccurred(), "the pod did not start on a ready network")

			By("making STATUS fail: the same list, cni-fault's STATUS now an error")
			failing := sc.Fault().On(cniconf.VerbStatus, failStatus)
			sc.writeList(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), failing).AtVersion(cniconf.CNIVersion110))
			sc.ExpectNodeJournal(failing, cniconf.VerbStatus)
			Eventually(func(g Gomega) {
				_, _ = rt.CRI().Network(ctx)
				g.Expect(sc.SeeFired(ctx)).To(BeTrue())
			}).WithContext(ctx).WithTimeout(statusPollWindow).WithPolling(pollInterval).Should(Succeed(),
				"the runtime did not ask the failing STATUS")

			By("stopping and removing the pod, as kubelet does")
			contract.Expect(rt.CRI().StopPodSandbox(ctx, id)).To(Succeed(), "StopPodSandbox failed while STATUS failed")
			contract.Expect(rt.CRI().RemovePodSandbox(ctx, id)).To(Succeed(), "RemovePodSandbox failed while STATUS failed")

			By("inventorying the instance")
			contract.Expect(sc.Leaks(ctx)).To(BeClean())
		}, SpecTimeout(scenarioTimeout))
	})

	When("STATUS hangs", Scenario("status-hang"), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing a healthy network, then a CNI 1.1.0 list whose cni-fault hangs STATUS once")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin()))
			// Once: the call that hangs is stopped by its PID after the
			// spec; a second hang would hold the runtime's next Status (and
			// on containerd its config reload, behind go-cni's lock).
			f := sc.Fault().On(cniconf.VerbStatus, cniconf.Hang().Times(1), cniconf.Pass())
			sc.writeList(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f).AtVersion(cniconf.CNIVersion110))
			sc.ExpectNodeJournal(f, cniconf.VerbStatus)
			DeferCleanup(sc.stopHungPlugins)
		}, NodeTimeout(scenarioSetupTimeout))

		It("still answers CRI Status within kubelet's polling period", func(ctx SpecContext) {
			By("calling CRI Status, each call with kubelet's 5 s period as its deadline, until the runtime asks STATUS")
			var slow error
			quiet := NewGomega(func(string, ...int) {})
			asked := quiet.Eventually(func() bool {
				cctx, cancel := context.WithTimeout(ctx, statusAnswerDeadline)
				defer cancel()
				if _, err := rt.CRI().Network(cctx); err != nil && slow == nil {
					slow = err
				}
				return sc.SeeFired(ctx)
			}).WithContext(ctx).WithTimeout(statusPollWindow).WithPolling(pollInterval).Should(BeTrue())
			if !asked {
				skipNoStatus()
			}

			By("calling CRI Status once more while the STATUS plugin still hangs")
			// A runtime that asks STATUS in the background may have answered
			// every call above before the hang began: the verdict needs a
			// call that overlapped it.
			pid, err := sc.hungPID(cniconf.VerbStatus)
			Expect(err).NotTo(HaveOccurred(), "reading cni-fault's journal")
			hung := pid > 0 && syscall.Kill(pid, 0) == nil
			Expect(hung || slow != nil).To(BeTrue(),
				"no CRI Status call overlapped the hung STATUS: its plugin (pid %d) ended before the harness called again", pid)
			if hung {
				cctx, cancel := context.WithTimeout(ctx, statusAnswerDeadline)
				if _, err := rt.CRI().Network(cctx); err != nil && slow == nil {
					slow = err
				}
				cancel()
			}
			contract.Expect(slow).NotTo(HaveOccurred(), "CRI Status did not answer within %s while a STATUS hung", statusAnswerDeadline)
		}, SpecTimeout(scenarioTimeout))
	})

	When("STATUS fails twice, then passes", Scenario("status-recovers"), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (STATUS: error twice, then pass)")
			install(ctx, sc.Fault().On(cniconf.VerbStatus, failStatus.Times(2), cniconf.Pass()))
		}, NodeTimeout(scenarioSetupTimeout))

		It("reports NetworkReady=true again without a restart, and a pod then starts", func(ctx SpecContext) {
			By("polling CRI Status as kubelet does")
			sc.expectStatusAsked(ctx)
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			contract.Eventually(func(g Gomega) {
				st, err := rt.CRI().Network(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Ready).To(BeTrue(), "NetworkReady did not come back once STATUS passed: %s %s", st.Reason, st.Message)
			}).WithContext(ctx).WithTimeout(statusPollWindow).WithPolling(pollInterval).Should(Succeed())

			By("running a pod sandbox")
			_, err := sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
			sc.expectStartedAgain(ctx, err, "the pod's start once STATUS passed")
		}, SpecTimeout(scenarioTimeout))
	})
})

// InstallStatusNetwork starts from a runtime that is ready on a healthy
// network, as a node is before its network agent starts failing, then
// writes a CNI 1.1.0 list as the only config and waits until the runtime
// holds it, ready or not: STATUS, not the conf dir, is what may make it not
// ready. Starting ready keeps a runtime that asks STATUS only while it is
// not ready (CRI-O) from asking it by accident of the previous scenario.
func (sc *scenario) InstallStatusNetwork(ctx SpecContext, l cniconf.NetworkList) {
	GinkgoHelper()
	sc.InstallNetwork(ctx, cniconf.NewList(l.Name, sc.Network.BridgePlugin()))
	sc.writeList(ctx, l)
	Eventually(func(g Gomega) {
		st, err := runtimes.Network(ctx, rt)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.HoldsNetwork(l.Name)).To(BeTrue(), "the runtime holds another CNI config: %s %v", st.CNIConfig, st.Networks)
	}).WithContext(ctx).WithTimeout(networkSettleTimeout).WithPolling(pollInterval).Should(Succeed(),
		"the runtime did not load network %q", l.Name)
}

// expectStatusAsked polls CRI Status for one kubelet period and skips the
// scenario when the runtime never invoked STATUS meanwhile: it does not use
// the verb to report readiness (a finding, with the journal as its proof).
func (sc *scenario) expectStatusAsked(ctx SpecContext) {
	GinkgoHelper()
	quiet := NewGomega(func(string, ...int) {})
	var readErr error
	asked := quiet.Eventually(func() int {
		_, _ = rt.CRI().Network(ctx)
		var n int
		n, readErr = sc.Invocations(cniconf.VerbStatus)
		return n
	}).WithContext(ctx).WithTimeout(statusPollWindow).WithPolling(pollInterval).Should(BeNumerically(">", 0))
	if !asked {
		// A finding only where the journal was read: that it could not be
		// says nothing about the runtime.
		Expect(readErr).NotTo(HaveOccurred(), "reading cni-fault's journal")
		skipNoStatus()
	}
}

// skipNoStatus reports a runtime that did not ask STATUS as such: a finding,
// with the journal as its proof, not a harness error.
func skipNoStatus() {
	skipLacking(report.NeedCNIStatus, "the runtime did not invoke CNI STATUS while CRI Status was polled for "+statusPollWindow.String()+
		" after the list was installed (cni-fault's journal holds no STATUS call): its NetworkReady does not follow STATUS here")
}

// hungPID is the pid of the first cni-fault invocation of verb v that
// hangs, from the journal; 0 if none does yet.
func (sc *scenario) hungPID(v cniconf.Verb) (int, error) {
	entries, err := sc.Journal()
	for _, e := range entries {
		if e.Verb == v && e.Action == cniconf.ActionHang {
			return e.PID, err
		}
	}
	return 0, err
}
