package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
)

// The control: if a healthy pod cannot start and go away cleanly, no fault
// scenario's verdict on this runtime means anything.
var _ = Describe("A pod sandbox", func() {
	var sc *scenario

	When("the network is a working bridge with host-local IPAM", Scenario("healthy-network"), Label("control"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing the bridge network")
			sc.InstallNetwork(ctx, cniconf.BridgeList(sc.Network))
		}, NodeTimeout(scenarioSetupTimeout))

		It("gets an IP and leaves nothing once stopped and removed", func(ctx SpecContext) {
			By("running a pod sandbox")
			id := sc.RunSandbox(ctx)

			By("reading the pod's IP")
			status, err := rt.CRI().PodSandboxStatus(ctx, id)
			Expect(err).NotTo(HaveOccurred())
			contract.Expect(status.GetNetwork().GetIp()).To(HavePrefix("10.250."), "the pod got no IP from the network")

			By("stopping and removing the pod as kubelet does")
			contract.Expect(rt.CRI().StopPodSandbox(ctx, id)).To(Succeed())
			contract.Expect(rt.CRI().RemovePodSandbox(ctx, id)).To(Succeed())

			By("inventorying the instance")
			contract.Expect(sc.Leaks(ctx)).To(BeClean())
		}, SpecTimeout(scenarioTimeout))
	})
})
