package cni_test

import (
	"errors"
	"fmt"
	"maps"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// stormCase is how a storm scenario's pods fail and how the fault clears.
type stormCase struct {
	// deadline is each RunPodSandbox's client deadline.
	deadline scn.Deadline
	// settle is how long what the runtime still cleans up after a call its
	// client gave up on may take to go (0: the settling kinds' window, as
	// Leaks has it).
	settle time.Duration
	clear  func(ctx SpecContext)
}

// A node boots, or a rollout lands, and kubelet starts many pods at once
// under one fault. Each failure alone is judged by its single scenario;
// a storm adds races — in sandbox name reservation, IPAM locking, netns
// cleanup — which show as more leaks or fewer than that many single
// failures leave, or as a pod that cannot be retried.
var _ = Describe("RunPodSandbox for many pods at once", func() {
	var sc *scenario
	current := func() *scenario { return sc }
	healthy := func(ctx SpecContext) { Expect(sc.SetFaults(nil)).To(Succeed()) }

	// Every storm has one pod that fails alone first, then the storm's.
	BeforeEach(func(ctx SpecContext) {
		sc = newScenario(ctx)
		sc.Pods = 1 + tc.StormPods
	}, NodeTimeout(scenarioSetupTimeout))

	When("many pods start at once while a later plugin fails ADD and DEL", KubeletScenario("storm-partial-add-del-fails", kubeletCase{
		family: kubeletFirstAttempt, storm: true, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error"))
		},
	}), Label("fault:storm"), func() {
		BeforeEach(func(ctx SpecContext) {
			By("installing bridge, then cni-fault (ADD: error, DEL: error, for every pod)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().
				On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error")))
		}, NodeTimeout(scenarioSetupTimeout))
		itLeavesWhatSingleFailuresLeave(current, stormCase{deadline: scn.Within(criCallTimeout), clear: healthy})
	})

	When("many pods start at once while the CNI config dir is empty", KubeletScenario("storm-no-cni-config", kubeletCase{
		family: kubeletLateConfig, storm: true,
	}), Label("fault:storm"), func() {
		BeforeEach(func(ctx SpecContext) {
			By("emptying the conf dir until the runtime has no usable network")
			sc.InstallNoNetwork(ctx)
		}, NodeTimeout(scenarioSetupTimeout))
		itLeavesWhatSingleFailuresLeave(current, stormCase{deadline: mayBlockDeadline, clear: func(ctx SpecContext) {
			sc.InstallNetwork(ctx, cniconf.BridgeList(sc.Network))
		}})
	})

	When("many pods start at once while ADD hangs past the client's deadline", KubeletScenario("storm-add-hang", kubeletCase{
		family: kubeletFirstAttempt, storm: true, hang: true, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
		},
	}), Label("fault:storm", "fault:hang"), func() {
		BeforeEach(func(ctx SpecContext) {
			By("installing bridge, then cni-fault (ADD: hang once per pod, then pass)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass()))
		}, NodeTimeout(scenarioSetupTimeout))
		itLeavesWhatSingleFailuresLeave(current, stormCase{deadline: repeatHangDeadline, settle: hangSettleWindow,
			clear: func(ctx SpecContext) {
				healthy(ctx)
				sc.stopHungPlugins()
			}})
	})
})

// itLeavesWhatSingleFailuresLeave runs one pod alone under the fault, then
// the storm's pods at once: what the storm left must be, kind by kind, its
// pod count times what the one left; and once the fault cleared and
// kubelet's teardown ran, every storm pod must start.
func itLeavesWhatSingleFailuresLeave(current func() *scenario, st stormCase) {
	It("leaves exactly what as many single failures leave, and every pod starts once the fault clears", func(ctx SpecContext) {
		sc := current()
		storm := sc.Pods - 1
		By("running one pod alone under the fault")
		errs := sc.RunPodsAtOnceE(ctx, st.deadline, 0, []int{0})
		sc.ExpectFaultFired(ctx, faultFiredTimeout)
		contract.Expect(errs[0]).To(HaveOccurred(), "RunPodSandbox succeeded despite the fault")
		single := sc.settledCounts(ctx, st.settle, nil)

		By(fmt.Sprintf("running %d pods at once under the fault", storm))
		errs = sc.RunPodsAtOnceE(ctx, st.deadline, 0, podRange(1, sc.Pods))
		contract.Expect(failed(errs)).To(Equal(storm), "RunPodSandbox succeeded despite the fault: %v", errs)
		want := map[string]int{}
		for kind, n := range single {
			want[kind] = (1 + storm) * n
		}
		total := sc.settledCounts(ctx, st.settle, want)
		left := map[string]int{}
		for kind, n := range total {
			if n -= single[kind]; n != 0 {
				left[kind] = n
			}
		}
		sc.Storm = new(verdict.Storm(storm, single, left, 0))
		contract.Expect(stormReport{sc.ID, *sc.Storm}).To(LeaveWhatSingleFailuresLeave())

		By("clearing the fault, then tearing the failed sandboxes down as kubelet does")
		st.clear(ctx)
		sc.kubeletRemovesFailedSandboxes(ctx)

		By("retrying every pod of the storm")
		errs = sc.RunPodsAtOnceE(ctx, scn.Within(criCallTimeout), 1, podRange(1, sc.Pods))
		sc.Storm.Retried = storm - failed(errs)
		sc.expectStartedAgain(ctx, errors.Join(errs...), "the retry of the storm's pods once the fault cleared")
	}, SpecTimeout(scenarioTimeout))
}

// settledCounts counts what the scenario left, by kind, once what the
// runtime still cleans up has gone: without settle as Leaks has it; with
// it, inventories for up to settle (or the settle window of a shared
// runtime, if longer) until the counts are want (nil: nothing) and nothing
// among them is caught mid-change (Transient), and the last counts.
func (sc *scenario) settledCounts(ctx SpecContext, settle time.Duration, want map[string]int) map[string]int {
	GinkgoHelper()
	if settle == 0 {
		return sc.leakCounts(ctx)
	}
	counts := func() map[string]int { return report.CountKinds(sc.Scenario.Leaks) }
	window := max(settle, sc.SettleWindow())
	sc.inventoryUntil(ctx, window, func() bool {
		if sc.Transient() {
			return false
		}
		if maps.Equal(counts(), want) {
			return true
		}
		// Nothing can go before the window ends (CRI-O's hung ADD):
		// these are the counts it would end with.
		if why := sc.HeldByHang(window); why != "" {
			GinkgoWriter.Printf("counting %v now, not at the end of the %s window: %s\n", counts(), window, why)
			return true
		}
		return false
	})
	sc.FinishInspection(sc.journal)
	return counts()
}
