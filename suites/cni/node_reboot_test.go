package cni_test

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// rebootPods is how many pods run when the node reboots: more than one,
// so that a runtime that releases the first pod's address and not the
// others' (a loop that gives up at its first error) is seen.
const rebootPods = 3

// rebootCleanupWindow is how long a runtime's own cleanup after a reboot
// (beside kubelet's Stop and Remove) gets to finish before the inventory
// is judged: the bound CRI-O itself gives one sandbox's network stop
// (server/sandbox_network.go networkStop: "give a network stop call 1
// minutes"), which a loaded 2-core node may need, never less. A poll: a
// runtime that cleaned up is judged at once (0.5 s here, idle), so only a
// runtime that leaks waits it out.
const rebootCleanupWindow = time.Minute

// The node reboots with pods running (a kernel upgrade, a power cut): every
// process of the runtime and its pods dies, every mount goes and the
// runtime's /run state is a fresh tmpfs, while its root on disk,
// host-local's leases under its data dir and libcni's cache under
// /var/lib/cni survive. Kubelet, once the runtime is back, lists the old
// sandboxes and stops and removes them: that must release everything,
// addresses included. A runtime whose Stop skips the CNI DEL because the
// netns path is gone leaks every address the pods held — the classic
// post-reboot leak that drains a node's range one reboot at a time.
var _ = Describe("Running pods", func() {
	var (
		sc  *scenario
		ctl runtimes.Controllable
	)

	When("the node reboots and kubelet then stops and removes the old sandboxes", KubeletScenario("node-reboot", kubeletCase{family: kubeletReboot}),
		Label("fault:reboot", report.LabelManagedOnly, "kubelet:node-reboot", "once"), func() {
			BeforeEach(func(ctx SpecContext) {
				var ok bool
				if ctl, ok = rt.(runtimes.Controllable); !ok {
					skipLacking(report.NeedManaged, "the harness does not control this runtime's process, pods, mounts or state dir (external endpoint): it cannot reboot it")
				}
				// Registered before the scenario's own cleanup, so it runs
				// after the restore: a runtime that does not boot again is
				// replaced for the rest of the run.
				DeferCleanup(replaceDeadRuntime, NodeTimeout(runtimeTeardownTimeout+runtimeStartTimeout))
				sc = newScenario(ctx)
				sc.Pods = rebootPods
				By("installing bridge, observed by cni-fault (every verb passes)")
				sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
			}, NodeTimeout(scenarioSetupTimeout))

			It("releases everything the old sandboxes held, addresses included, once kubelet stops and removes them", func(ctx SpecContext) {
				By("starting the pods on the healthy network")
				for i, err := range sc.RunPodsAtOnceE(ctx, scn.Within(criCallTimeout), 0, podRange(0, rebootPods)) {
					Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network (pod %d)", i)
				}
				before, err := inspect.Take(ctx, sc.RebootTarget())
				Expect(err).NotTo(HaveOccurred(), "inventorying the pods before the reboot")

				By("rebooting the node: the runtime and every pod process killed, the mounts and the state dir gone, the disk kept")
				Expect(ctl.Reboot(ctx)).To(Succeed(), "rebooting the instance")
				after, err := inspect.Take(ctx, sc.RebootTarget())
				Expect(err).NotTo(HaveOccurred(), "inventorying the instance after the reboot")
				// Read now, before the runtime starts again and lays out its
				// state dir anew (CRI-O makes its netns pin dir at start).
				seen, took := scn.RebootSeen(before, after, rt.Inventory().NetNSDirs)
				if !took {
					GinkgoWriter.Printf("the reboot did not take: %s\n", seen)
				}
				sc.ExpectFault("the reboot to take every pod process, netns and mount, and the state dir, before the runtime starts again",
					func(context.Context) (string, bool) { return seen, took })

				By("starting the runtime again")
				logFrom := rt.LogSize()
				err = ctl.Restart(ctx)
				if err != nil && !ctl.Running() {
					contract.Expect(err).NotTo(HaveOccurred(), "the runtime did not come back after the reboot; its last log line: %s",
						lastLine(rt.LogSince(logFrom)))
				}
				Expect(err).NotTo(HaveOccurred(), "starting the runtime after the reboot")
				// Judged once the runtime is up again, so that a reboot that
				// did not take leaves a running runtime to the restore.
				sc.ExpectFaultFired(ctx, pollInterval)

				By("stopping and removing every old sandbox, as kubelet does after a reboot")
				removed := sc.kubeletTeardownAll(ctx)
				// A runtime may clean up after a reboot on its own, beside
				// kubelet: CRI-O tears down the network of every sandbox it
				// could not restore in the background of its start (server.go
				// restore, wipeResourceCleaner). Its cleanup gets
				// rebootCleanupWindow to finish; what is left after it is left.
				sc.inventoryUntil(ctx, rebootCleanupWindow, func() bool { return len(sc.Scenario.Leaks) == 0 })
				leaks := sc.Leaks(ctx) // what the old sandboxes hold, for the report
				contract.Expect(removed).To(BeTrue(),
					"kubelet's Stop and Remove after the reboot did not remove the old sandboxes (first error: %s)", orNone(sc.StopErr))
				contract.Expect(leaks).To(BeClean())
			}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout))
		})
})

// kubeletTeardownAll is kubelet's teardown of every sandbox of the
// scenario the runtime lists (StopPodSandbox, then RemovePodSandbox, each
// within kubelet's deadline, on kubelet's syncs: kubeletSyncs), and
// whether none is listed in the end. A runtime that lists none after the
// reboot has nothing for kubelet to stop: what the pods held must be gone
// already.
func (sc *scenario) kubeletTeardownAll(ctx SpecContext) bool {
	listed := func() []string { return sc.sandboxIDs(ctx) }
	GinkgoWriter.Printf("sandboxes listed after the reboot: %v\n", listed())
	return kubeletSyncs(ctx, teardownWindow, func() bool {
		for _, id := range listed() {
			for _, call := range []struct {
				name string
				f    func(context.Context, string) error
			}{{"StopPodSandbox", rt.CRI().StopPodSandbox}, {"RemovePodSandbox", rt.CRI().RemovePodSandbox}} {
				err := sc.Call(ctx, call.name, sc.PodUID(), scn.Within(criCallTimeout), func(cctx context.Context) error { return call.f(cctx, id) })
				if err != nil {
					GinkgoWriter.Printf("%s %s: %v\n", call.name, report.Short(id), err)
					if sc.StopErr == "" {
						sc.StopErr = err.Error()
					}
					break
				}
			}
		}
		pods, err := rt.CRI().ListPodSandboxes(ctx)
		return err == nil && !slices.ContainsFunc(pods, func(p *runtimeapi.PodSandbox) bool {
			return slices.Contains(sc.PodUIDs(), p.GetMetadata().GetUid())
		})
	})
}
