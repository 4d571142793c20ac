package cni_test

import (
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// lateConfigPods are the pods a node starts before its CNI config exists.
const lateConfigPods = 4

// A node boots, and pods start before the CNI DaemonSet has written its
// config: kubelet calls RunPodSandbox, with its runtime-request-timeout, as
// soon as the pods are bound. A managed runtime is restarted with its conf
// dir empty, as the node's boot starts it (an external one has its conf dir
// emptied live). containerd fails the calls at once; a CRI-O that was never
// ready holds them (server/sandbox_network.go waitForCNIPlugin) until a
// network loads, and then resumes them: their outcome is the report's
// held_calls. Once the config appears, kubelet tears down what the early
// attempts left and retries: nothing of them may remain, and the retried
// pods must start.
var _ = Describe("Pods started before the CNI config exists", func() {
	var sc *scenario

	When("the config appears after the pods were attempted", KubeletScenario("late-cni-config", kubeletCase{family: kubeletLateConfig, boot: true}), Label("fault:config", "kubelet:node-boot"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			sc.Pods = lateConfigPods
			By("emptying the conf dir until the runtime has no usable network")
			sc.InstallNoNetwork(ctx)
			if ctl, ok := rt.(runtimes.Controllable); ok {
				By("restarting the runtime with the conf dir empty, as the node boots")
				Expect(ctl.Crash(ctx)).To(Succeed())
				Expect(ctl.Restart(ctx)).To(Succeed())
			}
		}, NodeTimeout(scenarioSetupTimeout+runtimeRecoverTimeout))

		It("leaves nothing of the early attempts once kubelet tore them down, and the retried pods start", func(ctx SpecContext) {
			By(fmt.Sprintf("attempting %d pods with kubelet's deadline while no config exists", sc.Pods))
			pods := podRange(0, sc.Pods)
			calls := sc.StartPodsAtOnce(ctx, scn.Within(criCallTimeout), 0, pods)
			held := sc.failedOrHeld(ctx, calls, pods)
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			early := sc.Leaks(ctx)
			sc.TeardownLeaks = early.Leaks
			GinkgoWriter.Printf("the early attempts left %d resource(s), %d call(s) held\n", len(early.Leaks), len(held))

			// The bridge alone: cni-fault, which saw none of the early
			// attempts, must not answer for them (del_after_failed_add).
			By("writing the CNI config, as the network DaemonSet does")
			sc.InstallNetwork(ctx, cniconf.BridgeList(sc.Network))
			errs := calls.Wait()
			if len(held) > 0 {
				sc.HeldCalls = heldOutcome(errs, held)
				GinkgoWriter.Printf("held calls: %s\n", sc.HeldCalls.Text())
			}
			for i, err := range errs {
				if !held[i] {
					contract.Expect(err).To(HaveOccurred(), "RunPodSandbox of pod %d succeeded with no CNI config", pods[i])
				}
			}

			By("tearing the early attempts down as kubelet does")
			sc.kubeletRemovesFailedSandboxes(ctx)
			contract.Expect(sc.Leaks(ctx)).To(BeClean())

			By("retrying every pod")
			errs = sc.RunPodsAtOnceE(ctx, scn.Within(criCallTimeout), 1, pods)
			sc.expectStartedAgain(ctx, errors.Join(errs...), "the pods' retry once the config appeared")
		}, SpecTimeout(scenarioTimeout))
	})
})

// failedOrHeld waits until each call returned or the runtime's log says it
// holds it, for as long as a runtime may take to reach either on a loaded
// machine (scn.HangReach), and returns the held calls by index.
func (sc *scenario) failedOrHeld(ctx SpecContext, calls *podCalls, pods []int) map[int]bool {
	GinkgoHelper()
	held := map[int]bool{}
	Eventually(func(g Gomega) {
		for i, k := range pods {
			if calls.done[i].Load() {
				continue
			}
			held[i] = sc.Held(sc.PodConfigOf(k, 0).GetMetadata().GetUid())
			g.Expect(held[i]).To(BeTrue(), "pod %d's call neither returned nor is held", k)
		}
	}).WithContext(ctx).WithTimeout(scn.HangReach).WithPolling(pollInterval).Should(Succeed(),
		"the runtime neither failed nor held every early attempt")
	for i := range held {
		if !held[i] {
			delete(held, i)
		}
	}
	return held
}

// heldOutcome is what the held calls (by index) returned once resumed.
func heldOutcome(errs []error, held map[int]bool) *report.HeldCalls {
	h := &report.HeldCalls{Held: len(held)}
	for i := range held {
		if errs[i] == nil {
			h.Started++
		} else {
			h.Failed = append(h.Failed, errs[i].Error())
		}
	}
	return h
}
