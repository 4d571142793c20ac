package cni_test

import (
	"context"
	"fmt"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/cri"
	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// kubeletStatusPeriod is kubelet's period of runtime Status calls
// (pkg/kubelet/kubelet.go Run: wait.Until(kl.updateRuntimeUp, 5*time.Second,
// …)), whose NetworkReady gates new pods: a contract value. A CRI Status
// that takes longer holds up kubelet's next one, so statusAnswerDeadline,
// what one CRI Status may take while a STATUS hangs, is the same period.
const (
	kubeletStatusPeriod  = 5 * time.Second
	statusAnswerDeadline = kubeletStatusPeriod
)

// crioStatusPoll is CRI-O's own period of STATUS calls while it is not
// ready (internal/config/cnimgr/cnimgr.go initPollInterval, 500 ms): a
// contract value.
const crioStatusPoll = 500 * time.Millisecond

// statusPolls is how the harness polls CRI Status for the runtime to ask
// STATUS and act on it. containerd 2.x runs STATUS inside each CRI Status
// call (go-cni Status), so an answered CRI Status is the event itself, and
// the polls count at least three of them however slow each is; CRI-O asks
// on its own period, three of which the span holds. A runtime asking on a
// slower timer of its own would be reported as not asking.
var statusPolls = scn.Rounds{Span: 3 * crioStatusPoll, Interval: pollInterval, Min: 3}

// statusPollsBound bounds a poll of CRI Status: its rounds, each a CRI
// Status within kubelet's deadline.
var statusPollsBound = statusPolls.Bound(criCallTimeout)

// CNI 1.1's STATUS lets a plugin say "not ready for ADD" without the conf
// dir dance. Who asks it differs (docs/how-it-works.md): containerd 2.x
// runs it on every CRI Status for a list of cniVersion 1.1.0 (go-cni
// Status); containerd 1.6 and 1.7 never do (their libcni has no STATUS);
// CRI-O polls it only until it first passes after a start. A runtime that
// does not ask is reported as such (skipped, with the journal's word for
// it): that is a finding, not a harness error.
var _ = Describe("CNI STATUS", func() {
	var sc *scenario

	install := func(ctx SpecContext, f cniconf.Fault) {
		sc.InstallStatusNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f).AtVersion(cniconf.CNIVersion110))
		sc.ExpectNodeJournal(f, cniconf.VerbStatus)
	}

	When("STATUS fails", KubeletScenario("status-not-ready", kubeletCase{
		family: kubeletNoNetwork, chain: withStatusList, breaks: breakByFailingStatus,
	}), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (STATUS: error)")
			install(ctx, sc.Fault().On(cniconf.VerbStatus, failStatus))
		}, NodeTimeout(scenarioSetupTimeout))

		It("reports NetworkReady=false, and a RunPodSandbox made anyway leaves nothing if it fails", func(ctx SpecContext) {
			By("polling CRI Status as kubelet does, until the runtime reports NetworkReady=false")
			sc.expectStatusAsked(ctx)
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			contract.Expect(sc.pollReady(ctx, false)).To(Succeed(), "NetworkReady stayed true while STATUS failed")

			By("running a pod sandbox anyway, as a client that does not wait would")
			if _, err := sc.RunSandboxWithin(ctx, mayBlockDeadline); err != nil {
				By("inventorying the instance after the failed call")
				contract.Expect(sc.Leaks(ctx)).To(BeClean())
			}
		}, SpecTimeout(scenarioTimeout))
	})

	When("STATUS starts failing after a pod started", KubeletScenario("status-not-ready-teardown", kubeletCase{
		family: kubeletTeardown, chain: withStatusList, breaks: breakByFailingStatus, clears: restoreStatus,
	}), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
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
			sc.expectStatusFailing(ctx)

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
			asked := pollRounds(ctx, statusPolls, statusPolls.Bound(statusAnswerDeadline), func() bool {
				cctx, cancel := context.WithTimeout(ctx, statusAnswerDeadline)
				defer cancel()
				if _, err := rt.CRI().Network(cctx); err != nil && slow == nil {
					slow = err
				}
				return sc.SeeFired(ctx)
			})
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

	// Under kubelet STATUS fails until the harness makes it pass again, as
	// late-cni-config's config appears: kubelet's own Status polls would
	// use up two failures before its pod appeared. What is compared is
	// the recovery: NetworkReady back without a restart, and the pod
	// started.
	When("STATUS fails twice, then passes", KubeletScenario("status-recovers", kubeletCase{
		family: kubeletLateConfig, chain: withStatusList, breaks: breakByFailingStatus, clears: restoreStatus,
	}), Label("fault:status", report.NeedsLabel(report.NeedCNIStatus)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (STATUS: error twice, then pass)")
			install(ctx, sc.Fault().On(cniconf.VerbStatus, failStatus.Times(2), cniconf.Pass()))
		}, NodeTimeout(scenarioSetupTimeout))

		It("reports NetworkReady=true again without a restart, and a pod then starts", func(ctx SpecContext) {
			By("polling CRI Status as kubelet does")
			sc.expectStatusAsked(ctx)
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			contract.Expect(sc.pollReady(ctx, true)).To(Succeed(), "NetworkReady did not come back once STATUS passed")

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
	Expect(awaitNetwork(ctx, func(st cri.NetworkStatus) error {
		if !st.HoldsNetwork(l.Name) {
			return fmt.Errorf("the runtime holds another CNI config: %s %v", st.CNIConfig, st.Networks)
		}
		return nil
	})).To(Succeed(), "the runtime did not load network %q", l.Name)
}

// pollReady polls CRI Status (statusPolls) until NetworkReady is want, and
// returns what the last poll said otherwise.
func (sc *scenario) pollReady(ctx SpecContext, want bool) error {
	var last error
	pollRounds(ctx, statusPolls, statusPollsBound, func() bool {
		st, err := rt.CRI().Network(ctx)
		switch {
		case err != nil:
			last = err
		case st.Ready != want:
			last = fmt.Errorf("NetworkReady=%v (%s %s) after CRI Status polled %s", st.Ready, st.Reason, st.Message, statusPolls)
		default:
			last = nil
		}
		return last == nil
	})
	return last
}

// expectStatusAsked polls CRI Status (statusPolls) and skips the scenario
// when the runtime never invoked STATUS meanwhile: it does not use the verb
// to report readiness (a finding, with the journal as its proof).
func (sc *scenario) expectStatusAsked(ctx SpecContext) {
	GinkgoHelper()
	var readErr error
	asked := pollRounds(ctx, statusPolls, statusPollsBound, func() bool {
		_, _ = rt.CRI().Network(ctx)
		var n int
		n, readErr = sc.Invocations(cniconf.VerbStatus)
		return n > 0
	})
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
	skipLacking(report.NeedCNIStatus, "the runtime did not invoke CNI STATUS while CRI Status was polled "+statusPolls.String()+
		" after the list was installed (cni-fault's journal holds no STATUS call): its NetworkReady does not follow STATUS here")
}

// failStatus is the STATUS error the scenarios inject: the plugin not
// available, as a CNI agent that is not ready says.
var failStatus = cniconf.Fail(cniconf.CodePluginNotAvailable, "cnifault: injected STATUS error")

// expectStatusFailing makes STATUS fail in the scenario's list (the same
// list, cni-fault's STATUS now failStatus) and waits, polling CRI Status as
// kubelet does, until the runtime asked the failing STATUS.
func (sc *scenario) expectStatusFailing(ctx SpecContext) {
	GinkgoHelper()
	Expect(sc.makeStatusFail(ctx)).To(Succeed())
}

// statusList is the scenario's CNI 1.1.0 list of bridge and f, whose
// STATUS a runtime asks.
func (sc *scenario) statusList(f cniconf.Fault) cniconf.NetworkList {
	return cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f).AtVersion(cniconf.CNIVersion110)
}

// makeStatusFail makes STATUS fail in the scenario's list (the same list,
// cni-fault's STATUS now failStatus) and polls CRI Status as kubelet does
// until the runtime asked the failing STATUS; the error says why not.
func (sc *scenario) makeStatusFail(ctx SpecContext) error {
	failing := sc.Fault().On(cniconf.VerbStatus, failStatus)
	if err := sc.writeListQuietly(ctx, sc.statusList(failing)); err != nil {
		return err
	}
	sc.ExpectNodeJournal(failing, cniconf.VerbStatus)
	if !pollRounds(ctx, statusPolls, statusPollsBound, func() bool {
		_, _ = rt.CRI().Network(ctx)
		return sc.SeeFired(ctx)
	}) {
		return fmt.Errorf("the runtime did not ask the failing STATUS (CRI Status polled %s)", statusPolls)
	}
	return nil
}

// expectHungAdd waits for the first pod's ADD to hang and returns the
// hung cni-fault's pid. It waits up to HangReach for a runtime to reach
// the plugin, but no longer than faultFiredTimeout once the call has
// ended: a call that failed before ADD (a missing sandbox image) never
// hangs.
func (sc *scenario) expectHungAdd(ctx SpecContext, first *podCalls) int {
	GinkgoHelper()
	quiet := NewGomega(func(string, ...int) {})
	quiet.Eventually(func() bool { return sc.SeeFired(ctx) || first.done[0].Load() }).
		WithContext(ctx).WithTimeout(scn.HangReach).WithPolling(pollInterval).Should(BeTrue())
	sc.ExpectFaultFired(ctx, faultFiredTimeout)
	hung, err := sc.hungPID(cniconf.VerbAdd)
	Expect(err).NotTo(HaveOccurred(), "reading cni-fault's journal")
	Expect(hung).To(BeNumerically(">", 0), "cni-fault's journal names no hung ADD")
	return hung
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
