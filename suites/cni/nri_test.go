package cni_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// nriRegisterTimeout bounds the wait for the runtime's NRI plugin to be
// registered: the runtime launches it at start and registers it within its
// plugin_registration_timeout (30 s in every instance, fixtures/containerd
// and fixtures/crio config), so this adds a loaded node's scheduling on top.
const nriRegisterTimeout = 45 * time.Second

// requireNRI skips the scenario where the runtime runs no NRI plugin of
// the harness's, with the reason the runtime gave, and waits until the
// plugin is registered.
func (sc *scenario) requireNRI(ctx SpecContext) {
	GinkgoHelper()
	n, err := sc.NRI()
	if err != nil {
		skipLacking(report.NeedNRI, "the runtime runs no NRI plugin of cnifault's: "+err.Error())
	}
	Eventually(func(g Gomega) {
		_, up := sc.NRIPluginUp()
		g.Expect(up).To(BeTrue(), "the runtime's NRI plugin is not registered (no Synchronize from a live cnifault-nri in %s); its log: %s",
			n.Journal, tail(n.Log))
	}).WithContext(ctx).WithTimeout(nriRegisterTimeout).Should(Succeed())
}

// tail is the end of a file, for a message.
func tail(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(raw) > 2048 {
		raw = raw[len(raw)-2048:]
	}
	return string(raw)
}

// An NRI plugin rejects a pod after the runtime set up its network and
// started its sandbox (containerd#13355): the ADD succeeded, so the
// failed call must DEL it, and leave neither the sandbox's processes nor
// its address.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	When("an NRI plugin rejects the pod after its network is up", KubeletScenario("nri-rejects-run", kubeletCase{
		family: kubeletFirstAttempt,
		arms: func(_ SpecContext, k *scenario) error {
			return k.SetNRIFault(cniconf.NRIRunPodSandbox, cniconf.Fail(0, "cnifault: injected NRI RunPodSandbox rejection"))
		},
	}), Label("fault:nri", report.LabelManagedOnly, report.NeedsLabel(report.NeedNRI)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			sc.requireNRI(ctx)
			By("installing bridge, observed by cni-fault, and an NRI fault (RunPodSandbox: reject)")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
			Expect(sc.SetNRIFault(cniconf.NRIRunPodSandbox, cniconf.Fail(0, "cnifault: injected NRI RunPodSandbox rejection"))).To(Succeed())
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("an NRI plugin rejects the same pod several times, then allows it, and the runtime restarts",
		KubeletScenario("nri-rejects-run-then-restart", kubeletCase{
			family: kubeletRetryRestart,
			arms: func(_ SpecContext, k *scenario) error {
				return k.SetNRIFault(cniconf.NRIRunPodSandbox, rejectedThenAllowed)
			},
		}), Label("fault:nri", report.LabelManagedOnly, report.NeedsLabel(report.NeedNRI), "kubelet:retry-restart"), func() {
			var ctl runtimes.Controllable
			BeforeEach(func(ctx SpecContext) {
				var ok bool
				if ctl, ok = rt.(runtimes.Controllable); !ok {
					skipLacking(report.NeedManaged, externalEndpoint)
				}
				// Registered before the scenario's own cleanup, so it runs
				// after the restore: a runtime this scenario left unable to
				// start is replaced for the rest of the run.
				DeferCleanup(replaceDeadRuntime, NodeTimeout(runtimeTeardownTimeout+runtimeStartTimeout))
				sc = newScenario(ctx)
				sc.requireNRI(ctx)
				By(fmt.Sprintf("installing bridge, observed by cni-fault, and an NRI fault (RunPodSandbox: reject %d times)", nriRejections))
				sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
				Expect(sc.SetNRIFault(cniconf.NRIRunPodSandbox, rejectedThenAllowed)).To(Succeed())
			}, NodeTimeout(scenarioSetupTimeout))

			It("comes back, lists the pod once, and leaves nothing once it is removed", func(ctx SpecContext) {
				By(fmt.Sprintf("running the pod %d times, as kubelet's syncs retry it, each rejected", nriRejections))
				for range nriRejections {
					_, err := sc.RunSandboxE(ctx)
					contract.Expect(err).To(HaveOccurred(), "RunPodSandbox succeeded despite the NRI rejection")
				}
				sc.ExpectFaultFired(ctx, faultFiredTimeout)

				By("running it once more, allowed")
				id, err := sc.RunSandboxE(ctx)
				started := err == nil
				sc.AllowedStarted = &started
				if err != nil {
					sc.AllowedError = err.Error()
				}
				contract.Expect(err).NotTo(HaveOccurred(), "the pod did not start once NRI allowed it")

				By("killing the runtime by its PID and starting it again")
				Expect(sc.ClearNRIFault()).To(Succeed())
				Expect(ctl.Crash(ctx)).To(Succeed())
				logFrom := rt.LogSize()
				err = ctl.Restart(ctx)
				back := err == nil || ctl.Running()
				sc.RuntimeBack = &back
				if err != nil && !ctl.Running() {
					contract.Expect(err).NotTo(HaveOccurred(), "the runtime did not come back after a restart; its last log line: %s",
						lastLine(rt.LogSince(logFrom)))
				}
				Expect(err).NotTo(HaveOccurred(), "restarting the runtime")

				By("listing the pod's sandboxes")
				pods, err := rt.CRI().ListPodSandboxes(ctx)
				Expect(err).NotTo(HaveOccurred())
				var mine []string
				for _, p := range pods {
					if p.GetMetadata().GetUid() == sc.PodUID() {
						mine = append(mine, p.GetId())
					}
				}
				contract.Expect(mine).To(ConsistOf(id), "the pod is not listed once, as the sandbox that started (%s)", id)

				By("stopping and removing the pod, as kubelet does")
				if err := sc.StopAndRemoveLeftovers(ctx); err != nil {
					GinkgoWriter.Printf("stop/remove after restart: %v\n", err)
				}
				By("inventorying the instance")
				contract.Expect(sc.Leaks(ctx)).To(BeClean())
			}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout))
		})
})

// nriRejections is how many times the restart scenario's pod is rejected
// before it is allowed: containerd#13609 needed more than one record under
// the pod's sandbox name for the restart to fail.
const nriRejections = 3

// rejectedThenAllowed is the restart scenario's NRI fault, in its plain
// run and under kubelet: nriRejections rejections, then the pod allowed.
var rejectedThenAllowed = cniconf.Fail(0, "cnifault: injected NRI RunPodSandbox rejection").Times(nriRejections)

// lastLine is the last non-empty line of a log.
func lastLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	return lines[len(lines)-1]
}
