package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// itFailsAndLeavesNothing declares the contract every fault scenario shares:
// RunPodSandbox returns an error, and right after it the instance holds
// nothing the call created.
func itFailsAndLeavesNothing(current func() *scenario) {
	It("fails and leaves nothing behind", func(ctx SpecContext) {
		sc := current()
		By("running a pod sandbox")
		_, err := sc.RunSandboxE(ctx)
		contract.Expect(err).To(HaveOccurred(), "RunPodSandbox succeeded despite the fault")

		By("inventorying the instance right after the failed call")
		contract.Expect(sc.Leaks(ctx)).To(BeClean())
	}, SpecTimeout(scenarioTimeout))
}
