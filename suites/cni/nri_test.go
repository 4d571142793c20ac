package cni_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
				By(fmt.Sprintf("running the pod until NRI has rejected it %d times, as kubelet's syncs retry it", nriRejections))
				// A call counts once the runtime answered it: the plugin rejected
				// it, or it failed otherwise. One that ran out of kubelet's time
				// with no rejection may not have met the plugin yet: kubelet's
				// next sync calls again, after its backoff.
				answered, unanswered := 0, 0
				for answered < nriRejections && sc.NRIRejections() < nriRejections && unanswered <= allowedRetries {
					before := sc.NRIRejections()
					_, err := sc.RunSandboxE(ctx)
					contract.Expect(err).To(HaveOccurred(), "RunPodSandbox succeeded despite the NRI rejection")
					if status.Code(err) != codes.DeadlineExceeded || sc.NRIRejections() > before {
						answered++
						continue
					}
					unanswered++
					GinkgoWriter.Printf("RunPodSandbox ran out of time before NRI rejected it (%v): calling again after kubelet's backoff, as its next sync does\n", err)
					sc.awaitNRIRejection(ctx, before)
				}
				sc.ExpectFaultFired(ctx, faultFiredTimeout)
				Expect(unanswered).To(BeNumerically("<=", allowedRetries),
					"RunPodSandbox ran out of kubelet's time %d times before NRI had rejected the pod %d times (it did %d)", unanswered, nriRejections, sc.NRIRejections())

				By("running it once more, allowed, and again where the call ran out of time, as kubelet's next syncs do")
				id, err := sc.runAllowed(ctx)
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
			}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout+allowedRetries*(2*criCallTimeout+report.KubeletBackOff)))
		})
})

// allowedRetries bounds the restart scenario's calls that ran out of time
// with no NRI rejection before the pod is allowed (one that had not reached
// the plugin yet, or found the pod's name still held by one that had), and
// again the calls beyond one once it is allowed (runAllowed).
const allowedRetries = 2

// awaitNRIRejection waits, at most kubelet's backoff between two syncs, for
// the NRI plugin to have rejected the pod more than rejected times: a call
// that ran out of time may still be in the runtime on its way to the
// plugin, and holds the pod's name until it is done (containerd refuses a
// call for the name at once meanwhile).
func (sc *scenario) awaitNRIRejection(ctx SpecContext, rejected int) {
	quiet := NewGomega(func(string, ...int) {})
	quiet.Eventually(sc.NRIRejections).WithContext(ctx).WithTimeout(report.KubeletBackOff).WithPolling(pollInterval).Should(BeNumerically(">", rejected))
}

// runAllowed runs the restart scenario's pod once NRI allows it, as
// kubelet's syncs do: where the call ends on kubelet's request deadline, the
// next sync calls again; any other error is the runtime's answer. On a
// loaded node a runtime may still be rolling back the last rejected attempt
// when the allowed one comes, and CRI-O then holds the pod's name for it and
// makes the new call wait, up to the caller's whole deadline, for a result
// that a rejected attempt never gives ("name is reserved ... kubelet may be
// retrying requests that are timing out in CRI-O due to system load"). A
// loaded make test met it (crio-1.34: the third rejection's rollback stopped
// the pause for 2 minutes, the allowed call waited out its 2 minutes): a
// pod kubelet starts on its next sync is no failure of the runtime's.
func (sc *scenario) runAllowed(ctx SpecContext) (string, error) {
	GinkgoHelper()
	id, err := sc.RunSandboxE(ctx)
	for i := 0; i < allowedRetries && status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil; i++ {
		GinkgoWriter.Printf("the allowed RunPodSandbox ran out of time (%v): calling again, as kubelet's next sync does\n", err)
		id, err = sc.RunSandboxE(ctx)
	}
	return id, err
}

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
