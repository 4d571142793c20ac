package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// itFailsAndLeavesNothing declares the contract every fault scenario shares:
// RunPodSandbox returns an error, and right after it the instance holds
// nothing the call created. Either is judged only once the harness saw the
// injected fault fire.
func itFailsAndLeavesNothing(current func() *scenario) {
	itFailsAndLeavesNothingWithin(current, scn.Within(criCallTimeout))
}

// itFailsAndLeavesNothingWithin is itFailsAndLeavesNothing with the client
// deadline d: a call the runtime holds past it has failed for the client,
// and is held to the same contract once it timed out.
func itFailsAndLeavesNothingWithin(current func() *scenario, d scn.Deadline) {
	It("fails and leaves nothing behind", func(ctx SpecContext) {
		sc := current()
		By("running a pod sandbox")
		_, err := sc.RunSandboxWithin(ctx, d)

		By("checking that the injected fault fired")
		sc.ExpectFaultFired(ctx, faultFiredTimeout)
		contract.Expect(err).To(HaveOccurred(), "RunPodSandbox succeeded despite the fault")

		By("inventorying the instance right after the failed call")
		contract.Expect(sc.Leaks(ctx)).To(BeClean())
	}, SpecTimeout(scenarioTimeout))
}
