package cni_test

import (
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// lateConfigPods are the pods a node starts before its CNI config exists.
const lateConfigPods = 4

// A node boots, and pods start before the CNI DaemonSet has written its
// config: a client that does not wait for NetworkReady calls
// RunPodSandbox at once, and kubelet does within the 5 s between its
// readiness polls. Once the config appears, kubelet tears the early
// attempts down and retries: nothing of them may remain, and the retried
// pods must start.
var _ = Describe("Pods started before the CNI config exists", func() {
	var sc *scenario

	When("the config appears after the pods were attempted", Scenario("late-cni-config"), Label("fault:config"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			sc.Pods = lateConfigPods
			By("emptying the conf dir until the runtime reports NetworkReady=false")
			sc.InstallNoNetwork(ctx)
		}, NodeTimeout(scenarioSetupTimeout))

		It("leaves nothing of the early attempts once kubelet tore them down, and the retried pods start", func(ctx SpecContext) {
			By(fmt.Sprintf("attempting %d pods while no config exists", sc.Pods))
			errs := sc.RunPodsAtOnceE(ctx, scn.Within(mayBlockCallTimeout), 0, podRange(0, sc.Pods))
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			contract.Expect(failed(errs)).To(Equal(sc.Pods), "RunPodSandbox succeeded with no CNI config: %v", errs)
			early := sc.Leaks(ctx)
			sc.TeardownLeaks = early.Leaks
			GinkgoWriter.Printf("the early attempts left %d resource(s)\n", len(early.Leaks))

			// The bridge alone: cni-fault, which saw none of the early
			// attempts, must not answer for them (del_after_failed_add).
			By("writing the CNI config, as the network DaemonSet does")
			sc.InstallNetwork(ctx, cniconf.BridgeList(sc.Network))

			By("tearing the early attempts down as kubelet does")
			sc.kubeletRemovesFailedSandboxes(ctx)
			contract.Expect(sc.Leaks(ctx)).To(BeClean())

			By("retrying every pod")
			errs = sc.RunPodsAtOnceE(ctx, scn.Within(criCallTimeout), 1, podRange(0, sc.Pods))
			contract.Expect(errors.Join(errs...)).NotTo(HaveOccurred(), "a retried pod did not start once the config appeared")
		}, SpecTimeout(scenarioTimeout))
	})
})
