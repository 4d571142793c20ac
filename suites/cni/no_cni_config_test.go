package cni_test

import (
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	. "github.com/onsi/ginkgo/v2"
)

// The scenario that started the project: containerd before 1.6.37 and 2.0
// aborted RunPodSandbox's deferred cleanup when the CNI teardown failed, so
// "cni plugin not initialized" left a NotReady sandbox and its netns behind.
// CRI-O instead holds RunPodSandbox until a network is ready.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario

	When("the CNI config dir is empty", Scenario("no-cni-config"), Label("fault:config"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("emptying the CNI config dir until the runtime reports NetworkReady=false")
			sc.InstallNoNetwork(ctx)
		}, NodeTimeout(scenarioSetupTimeout))

		// CRI-O holds the call until its network is ready.
		itFailsAndLeavesNothingWithin(func() *scenario { return sc }, scn.Within(mayBlockCallTimeout))
	})
})
