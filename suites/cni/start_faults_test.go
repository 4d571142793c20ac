package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// The network is up, and then the sandbox's pause container cannot be
// created (cri-o's network.bats "Clean up network if pod sandbox fails
// after plugin success"): the ADD succeeded, so the failed call must DEL
// it. The pod runs with the fault runtime handler, whose runc wrapper fails
// runc create for this pod only.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	When("creating the sandbox's container fails after its network is up", Scenario("sandbox-start-fails"),
		Label("fault:start", report.LabelManagedOnly), func() {
			BeforeEach(func(ctx SpecContext) {
				sc = newScenario(ctx)
				if _, err := runtimes.RuncFaultDirOf(rt); err != nil {
					Skip("the runtime has no fault runtime handler of cnifault's: " + err.Error())
				}
				By("installing bridge, observed by cni-fault, and a runc fault (create of the pod's sandbox fails)")
				sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
				Expect(sc.SetRuncFault("cnifault: injected runc create failure")).To(Succeed())
			}, NodeTimeout(scenarioSetupTimeout))
			itFailsAndLeavesNothing(current)
		})
})
