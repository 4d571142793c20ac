package cni_test

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
)

// Kubelet's teardown, compressed in time: it retries StopPodSandbox, then
// RemovePodSandbox, on every sync; the harness gives it teardownWindow,
// once while the fault persists and once after it cleared.
const (
	teardownWindow   = 2 * time.Second
	teardownInterval = 250 * time.Millisecond
)

// A pod starts on a healthy network; then its network breaks, and kubelet
// tears it down (pods stuck Terminating while the network agent is down or
// upgrading). A runtime may refuse to stop while the fault persists, but
// once it clears, kubelet's retries must finish the job and leave nothing;
// one that removes the pod while the fault persists must leave nothing
// either — removing it and stranding its address is what drains a pool.
var _ = Describe("A live pod's teardown", func() {
	var sc *scenario
	current := func() *scenario { return sc }
	withFault := func(f cniconf.Fault) cniconf.NetworkList {
		return cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f)
	}
	// Faults change in cni-fault's faults file, not in the conf dir: CRI-O
	// tears down with the config cached at ADD (ocicni forEachNetwork with
	// fromCache), so a rewritten list would never reach its DEL.
	setFaults := func(f cniconf.Fault) {
		Expect(sc.SetFaults(f.Faults)).To(Succeed())
		sc.ExpectJournal(f, cniconf.VerbDel)
	}
	healthy := func(ctx SpecContext) {
		Expect(sc.SetFaults(nil)).To(Succeed())
	}
	delFails := cniconf.Fail(7, "cnifault: injected DEL error")

	// Every teardown scenario starts alike: a pod's healthy network, whose
	// cni-fault only journals until the scenario breaks it.
	BeforeEach(func(ctx SpecContext) {
		sc = newScenario(ctx)
		By("installing bridge, then cni-fault (every verb passes)")
		sc.InstallNetwork(ctx, withFault(sc.Fault()))
	}, NodeTimeout(scenarioSetupTimeout))

	When("DEL fails after the pod started", Scenario("teardown-del-error"), Label("fault:teardown"), func() {
		itTearsDownAndLeavesNothing(current, func(ctx SpecContext) {
			setFaults(sc.Fault().On(cniconf.VerbDel, delFails))
		}, healthy)
	})

	When("DEL fails once after the pod started", Scenario("teardown-del-error-once"), Label("fault:teardown"), func() {
		itTearsDownAndLeavesNothing(current, func(ctx SpecContext) {
			setFaults(sc.Fault().On(cniconf.VerbDel, delFails.Times(1), cniconf.Pass()))
		}, healthy)
	})

	When("the CNI config dir is emptied after the pod started", Scenario("teardown-no-cni-config"), Label("fault:teardown"), func() {
		itTearsDownAndLeavesNothing(current, func(ctx SpecContext) {
			sc.InstallNoNetwork(ctx)
		}, func(ctx SpecContext) {
			sc.InstallNetwork(ctx, withFault(sc.Fault()))
		})
	})
})

// itTearsDownAndLeavesNothing starts the scenario's pod, breaks its network
// (inject), runs kubelet's teardown while the fault persists and, if the
// pod is still there, again after clear: the pod must be gone in the end,
// and nothing of it left at either point where it was removed.
func itTearsDownAndLeavesNothing(current func() *scenario, inject, clear func(ctx SpecContext)) {
	It("is removed while the fault persists or once it clears, and leaves nothing", func(ctx SpecContext) {
		sc := current()
		By("starting a pod on the healthy network")
		id, err := sc.RunSandboxWithin(ctx, criCallTimeout)
		Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")

		By("breaking the pod's network")
		inject(ctx)

		By("tearing the pod down as kubelet does, while the fault persists")
		removed := sc.kubeletTeardown(ctx, id)
		sc.ExpectFaultFired(ctx, faultFiredTimeout)
		left, err := inspect.Take(ctx, sc.Target())
		Expect(err).NotTo(HaveOccurred())
		sc.TeardownLeaks = inspect.Diff(sc.Baseline, left)
		if removed {
			sc.Teardown = report.TeardownWhileFaulted
			contract.Expect(sc.Leaks(ctx)).To(BeClean(), "the pod was removed while the fault persisted")
			return
		}

		By("clearing the fault, then tearing the pod down again")
		clear(ctx)
		sc.Teardown = report.TeardownNever
		if sc.kubeletTeardown(ctx, id) {
			sc.Teardown = report.TeardownAfterClear
		}
		contract.Expect(sc.Teardown).To(Equal(report.TeardownAfterClear), "kubelet's Stop and Remove did not remove the pod once the fault cleared")
		contract.Expect(sc.Leaks(ctx)).To(BeClean())
	}, SpecTimeout(scenarioTimeout))
}

// kubeletTeardown retries StopPodSandbox and then RemovePodSandbox within
// teardownWindow, as kubelet's syncs would, and reports whether the runtime
// no longer lists the pod.
func (sc *scenario) kubeletTeardown(ctx SpecContext, id string) bool {
	quiet := NewGomega(func(string, ...int) {})
	return quiet.Eventually(func() bool {
		if err := rt.CRI().StopPodSandbox(ctx, id); err != nil {
			GinkgoWriter.Printf("StopPodSandbox %s: %v\n", report.Short(id), err)
			return false
		}
		if err := rt.CRI().RemovePodSandbox(ctx, id); err != nil {
			GinkgoWriter.Printf("RemovePodSandbox %s: %v\n", report.Short(id), err)
			return false
		}
		pods, err := rt.CRI().ListPodSandboxes(ctx)
		return err == nil && !slices.ContainsFunc(pods, func(p *runtimeapi.PodSandbox) bool { return p.GetId() == id })
	}).WithContext(ctx).WithTimeout(teardownWindow).WithPolling(teardownInterval).Should(BeTrue())
}
