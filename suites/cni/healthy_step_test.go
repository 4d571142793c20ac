package cni_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// freshPod is the number of the pod that tells a runtime's failure from the
// node's: no fault targets it, and no scenario runs that many pods.
const freshPod = 999

// expectStartedAgain judges a pod start the scenario no longer faults (its
// retry once the fault cleared), whose error is err. A failed retry is the
// runtime's (fail) only where a fresh pod starts on the same network now;
// where the fresh pod fails too, the node cannot start pods, which the
// scenario did not inject, and the verdict is error, naming step.
func (sc *scenario) expectStartedAgain(ctx SpecContext, err error, step string) {
	GinkgoHelper()
	if err == nil {
		return
	}
	id, probe := sc.RunPod(ctx, scn.Within(criCallTimeout), sc.PodConfigOf(freshPod, 0))
	if probe != nil {
		Fail(fmt.Sprintf("%s failed (%v), and so did a fresh pod on the same healthy network (%v): the node cannot start pods now, which the scenario did not inject",
			step, err, probe))
	}
	removeAfterSpec(id)
	contract.Expect(err).NotTo(HaveOccurred(), "%s failed, while a fresh pod on the same network started", step)
}
