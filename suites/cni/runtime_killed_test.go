package cni_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// The runtime dies while a plugin is inside ADD (OOM kill, node problem).
// After a restart, kubelet's Stop and Remove are all that will ever clean
// up: whatever the dead call allocated must be reachable from them.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	var ctl runtimes.Controllable

	When("the runtime is killed while ADD is in progress", KubeletScenario("runtime-killed-mid-add", kubeletCase{
		family: kubeletFirstAttempt, killed: true, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
		},
	}), Label("fault:crash", "managed-only", "kubelet:runtime-restart"), func() {
		BeforeEach(func(ctx SpecContext) {
			ctl = controllable()
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: hang once, then pass)")
			sc.InstallHangingAdd(ctx)
		}, NodeTimeout(scenarioSetupTimeout))

		itLeavesNothingOnceRestarted(func() *scenario { return sc }, func() runtimes.Controllable { return ctl })
	})
})

// controllable is the managed runtime under test; an external one skips
// the scenario (managed-only).
func controllable() runtimes.Controllable {
	GinkgoHelper()
	ctl, ok := rt.(runtimes.Controllable)
	if !ok {
		skipLacking(report.NeedManaged, externalEndpoint)
	}
	return ctl
}

// itLeavesNothingOnceRestarted declares the killed-mid-ADD contract: the
// scenario's pod's ADD hangs (its install's fault), the runtime is killed
// by its PID and restarted, kubelet stops and removes what the dead call
// left, and nothing of it may be left.
func itLeavesNothingOnceRestarted(current func() *scenario, control func() runtimes.Controllable) {
	It("leaves nothing once restarted and the pod is stopped and removed", func(ctx SpecContext) {
		sc, ctl := current(), control()
		By("running a pod sandbox whose ADD hangs")
		sc.takeBaseline(ctx)
		sc.RunStarted = time.Now()
		done := make(chan error, 1)
		var returned atomic.Bool
		go func() {
			defer GinkgoRecover()
			cctx, cancel := context.WithTimeout(ctx, criCallTimeout)
			defer cancel()
			_, err := rt.CRI().RunPodSandbox(cctx, sc.PodConfig())
			returned.Store(true)
			done <- err
		}()
		// Up to kubelet's deadline for the runtime to reach the plugin,
		// but no longer than faultFiredTimeout once the call has ended:
		// a call that failed before ADD (a missing sandbox image) never
		// hangs.
		quiet := NewGomega(func(string, ...int) {})
		quiet.Eventually(func() bool { return sc.SeeFired(ctx) || returned.Load() }).
			WithContext(ctx).WithTimeout(criCallTimeout).WithPolling(pollInterval).Should(BeTrue())
		sc.ExpectFaultFired(ctx, faultFiredTimeout)

		By("killing the runtime by its PID while ADD hangs")
		Expect(ctl.Crash(ctx)).To(Succeed())
		var err error
		Eventually(done).WithContext(ctx).Should(Receive(&err))
		sc.Error = err.Error()
		sc.stopHungPlugins()

		By("restarting the runtime")
		Expect(ctl.Restart(ctx)).To(Succeed())

		By("stopping and removing every sandbox the dead call left, as kubelet does")
		if err := sc.StopAndRemoveLeftovers(ctx); err != nil {
			GinkgoWriter.Printf("stop/remove after restart: %v\n", err)
		}

		By("inventorying the instance")
		contract.Expect(sc.Leaks(ctx)).To(BeClean())
	}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout))
}
