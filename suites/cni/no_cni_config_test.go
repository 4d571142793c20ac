package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
)

// The scenario that started the project: containerd before 1.6.37 and 2.0
// aborted RunPodSandbox's deferred cleanup when the CNI teardown failed, so
// "cni plugin not initialized" left a NotReady sandbox and its netns behind.
// CRI-O, ready once and then without a network, fails RunPodSandbox in
// ocicni after it pinned the namespaces and made the shm and infra container.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario

	When("the CNI config dir is empty", KubeletScenario("no-cni-config", kubeletCase{family: kubeletNoNetwork}), Label("fault:config"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("emptying the CNI config dir until the runtime has no usable network")
			sc.InstallNoNetwork(ctx)
		}, NodeTimeout(scenarioSetupTimeout))

		// A runtime that holds the call (one never ready) meets the deadline.
		itFailsAndLeavesNothingWithin(func() *scenario { return sc }, mayBlockDeadline)
	})
})
