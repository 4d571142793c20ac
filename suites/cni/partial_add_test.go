package cni_test

import (
	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/cniconf"
)

// A chained ADD that fails part-way: bridge and host-local succeeded, a
// later plugin failed. The CNI spec wants DEL on every plugin; a list DEL
// stops at the first error, so a later plugin whose DEL fails strands the
// address bridge allocated (containerd issue 12130).
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	install := func(ctx SpecContext, f cniconf.Fault) {
		sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f))
	}
	failAdd := cniconf.Fail(7, "cnifault: injected ADD error after bridge")
	failDel := cniconf.Fail(7, "cnifault: injected DEL error")

	When("a later plugin fails ADD and DEL works", KubeletScenario("partial-add", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbAdd, failAdd) },
	}), Label("fault:partial"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: error)")
			install(ctx, sc.Fault().On(cniconf.VerbAdd, failAdd))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("a later plugin fails ADD and its DEL fails too", KubeletScenario("partial-add-del-fails", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, failAdd).On(cniconf.VerbDel, failDel)
		},
	}), Label("fault:partial"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: error, DEL: error)")
			install(ctx, sc.Fault().On(cniconf.VerbAdd, failAdd).On(cniconf.VerbDel, failDel))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("a later plugin fails ADD and its DEL fails once, then would succeed", KubeletScenario("partial-add-del-fails-once", kubeletCase{
		family: kubeletFirstAttempt, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, failAdd).On(cniconf.VerbDel, failDel.Times(1), cniconf.Pass())
		},
	}), Label("fault:partial", "once"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: error, DEL: error once, then pass)")
			install(ctx, sc.Fault().On(cniconf.VerbAdd, failAdd).On(cniconf.VerbDel, failDel.Times(1), cniconf.Pass()))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})
})
