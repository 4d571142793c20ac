package cni_test

import (
	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/cniconf"
)

// A plugin's ADD fails in each way a real plugin can: a CNI error, an exit
// with no output, a result that is not JSON, death by a signal. DEL works
// in all of them, so a runtime that sends it cleans everything up.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	// installFirst puts the fault first in the chain: nothing is allocated
	// when it fires.
	installFirst := func(ctx SpecContext, add cniconf.Step) {
		sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name,
			sc.Fault().On(cniconf.VerbAdd, add), sc.Network.BridgePlugin()))
	}
	// installLast puts the fault after bridge: an address and a veth exist
	// when it fires.
	installLast := func(ctx SpecContext, add cniconf.Step) {
		sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name,
			sc.Network.BridgePlugin(), sc.Fault().On(cniconf.VerbAdd, add)))
	}

	When("the first plugin returns a CNI error on ADD", KubeletScenario("add-error", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd, first: true,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error"))
		},
	}), Label("fault:add"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing cni-fault (ADD: error 7) before bridge")
			installFirst(ctx, cniconf.Fail(7, "cnifault: injected ADD error"))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("the first plugin exits non-zero without output on ADD", KubeletScenario("add-exit-no-output", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd, first: true,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbAdd, cniconf.Exit(2)) },
	}), Label("fault:add"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing cni-fault (ADD: exit 2, no output) before bridge")
			installFirst(ctx, cniconf.Exit(2))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("a plugin returns a result that is not JSON after bridge allocated", KubeletScenario("add-garbage-result", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbAdd, cniconf.Garbage()) },
	}), Label("fault:add"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: garbage on stdout, exit 0)")
			installLast(ctx, cniconf.Garbage())
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("a plugin dies by a signal during ADD after bridge allocated", KubeletScenario("add-crash", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbAdd, cniconf.Crash("SIGKILL")) },
	}), Label("fault:add"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: SIGKILL itself)")
			installLast(ctx, cniconf.Crash("SIGKILL"))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})
})
