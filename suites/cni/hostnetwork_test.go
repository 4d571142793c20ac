package cni_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// hostNetworkPod numbers a scenario's host-network pod among its pods (pod
// 0 is the plain pod whose ADD hangs beside it); attempt 0 is the control
// on the healthy network, attempt 1 the pod under the fault.
const hostNetworkPod = 1

// hostNetworkBound is how long a host-network pod's RunPodSandbox may
// take under a CNI fault: kubelet's runtime-request-timeout (2 min), the
// deadline kubelet gives the call. A runtime that has not started the pod
// by then has failed kubelet's call; a CNI's own DaemonSet pods, which are
// how a node repairs its network, would never start.
const hostNetworkBound = criCallTimeout

// hungPodDeadline is the client deadline of the plain pod whose ADD hangs
// beside a host-network pod: twice kubelet's, so that the hang outlasts
// the host-network pod's whole bound (a runtime that kills the plugin at
// its caller's deadline, as containerd does, would otherwise end it there).
const hungPodDeadline = 2 * criCallTimeout

// hostNetworkPodConfig is the scenario's host-network pod at attempt.
func (sc *scenario) hostNetworkPodConfig(attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := sc.PodConfigOf(hostNetworkPod, attempt)
	scn.HostNetworkShape().Apply(cfg)
	return cfg
}

// startHostNetworkControl starts a host-network pod on the healthy network
// and removes it: the node runs host-network pods, so that one that does
// not start under the fault is the fault's doing. (A node that cannot, as
// one whose sandbox image is gone, is the harness's error.)
func (sc *scenario) startHostNetworkControl(ctx SpecContext) {
	GinkgoHelper()
	id, err := sc.RunPod(ctx, scn.Within(criCallTimeout), sc.hostNetworkPodConfig(0))
	Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")
	Expect(rt.CRI().StopPodSandbox(ctx, id)).To(Succeed(), "stopping the host-network pod on the healthy network")
	Expect(rt.CRI().RemovePodSandbox(ctx, id)).To(Succeed(), "removing the host-network pod on the healthy network")
	// Only the pod under the fault fails the scenario's call.
	sc.Error = ""
}

// startHostNetworkPod starts the scenario's host-network pod under the
// fault within hostNetworkBound, then stops and removes it as kubelet does,
// and returns the runtime's errors of the three calls.
func (sc *scenario) startHostNetworkPod(ctx SpecContext) (id string, run, stop, remove error) {
	GinkgoHelper()
	By(fmt.Sprintf("starting a host-network pod within kubelet's runtime-request-timeout (%s)", hostNetworkBound))
	id, run = sc.RunPod(ctx, scn.Within(hostNetworkBound), sc.hostNetworkPodConfig(1))
	started := run == nil
	sc.HostNetworkStarted = &started
	if run != nil {
		return "", run, nil, nil
	}
	By("stopping and removing it, as kubelet does")
	stop = rt.CRI().StopPodSandbox(ctx, id)
	remove = rt.CRI().RemovePodSandbox(ctx, id)
	return id, nil, stop, remove
}

// A CNI's own DaemonSet pods run on the host network: when pod networking
// is broken they are how the node repairs it, and a runtime must start
// them at once, as kubelet admits them while NetworkReady is false. One
// that refuses them while its conf dir is empty or STATUS fails, or holds
// them behind another pod's hung ADD, cannot heal; and a host-network pod
// must leave nothing once removed.
var _ = Describe("RunPodSandbox for a host-network pod", func() {
	var sc *scenario

	When("the CNI config dir is empty", KubeletScenario("hostnetwork-no-cni-config", kubeletCase{
		family: kubeletHostNetwork, breaks: breakByEmptyConfDir,
	}),
		Label("fault:config", scn.ShapeHostNetwork, "kubelet:host-network"), func() {
			BeforeEach(func(ctx SpecContext) {
				sc = newScenario(ctx)
				By("installing the healthy network, observed by cni-fault")
				sc.InstallNetwork(ctx, sc.chain(sc.Fault()))
			}, NodeTimeout(scenarioSetupTimeout))

			It("starts the pod within kubelet's deadline, and leaves nothing once it is removed", func(ctx SpecContext) {
				By("starting a host-network pod on the healthy network, and removing it")
				sc.takeBaseline(ctx)
				sc.startHostNetworkControl(ctx)

				By("emptying the CNI config dir until the runtime has no usable network")
				sc.emptyConfDir(ctx)
				sc.ExpectNoNetwork()
				sc.RunStarted = time.Now()
				_, run, stop, remove := sc.startHostNetworkPod(ctx)
				sc.ExpectFaultFired(ctx, faultFiredTimeout)

				By("inventorying the instance")
				leaks := sc.Leaks(ctx)
				contract.Expect(run).NotTo(HaveOccurred(), "the runtime did not start a host-network pod within kubelet's %s while its CNI config dir was empty", hostNetworkBound)
				contract.Expect(stop).NotTo(HaveOccurred(), "StopPodSandbox of the host-network pod")
				contract.Expect(remove).NotTo(HaveOccurred(), "RemovePodSandbox of the host-network pod")
				contract.Expect(leaks).To(BeClean())
			}, SpecTimeout(scenarioTimeout))
		})

	When("STATUS fails", KubeletScenario("hostnetwork-status-not-ready", kubeletCase{
		family: kubeletHostNetwork, chain: withStatusList, breaks: breakByFailingStatus,
	}),
		Label("fault:status", scn.ShapeHostNetwork, report.NeedsLabel(report.NeedCNIStatus), "kubelet:host-network"), func() {
			BeforeEach(func(ctx SpecContext) {
				sc = newScenario(ctx)
				By("installing a CNI 1.1.0 list of bridge and cni-fault (STATUS: pass)")
				sc.InstallStatusNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()).AtVersion(cniconf.CNIVersion110))
			}, NodeTimeout(scenarioSetupTimeout))

			It("starts the pod within kubelet's deadline, and leaves nothing once it is removed", func(ctx SpecContext) {
				By("starting a host-network pod on the ready network, and removing it")
				sc.takeBaseline(ctx)
				sc.startHostNetworkControl(ctx)

				By("polling CRI Status as kubelet does, to see the runtime ask STATUS")
				sc.expectStatusAsked(ctx)

				By("making STATUS fail: the same list, cni-fault's STATUS now an error")
				sc.expectStatusFailing(ctx)
				if err := sc.pollReady(ctx, false); err != nil {
					GinkgoWriter.Printf("the runtime still reports NetworkReady while STATUS fails (status-not-ready's verdict): %v\n", err)
				}

				sc.RunStarted = time.Now()
				_, run, stop, remove := sc.startHostNetworkPod(ctx)

				By("inventorying the instance")
				leaks := sc.Leaks(ctx)
				contract.Expect(run).NotTo(HaveOccurred(), "the runtime did not start a host-network pod within kubelet's %s while STATUS failed", hostNetworkBound)
				contract.Expect(stop).NotTo(HaveOccurred(), "StopPodSandbox of the host-network pod")
				contract.Expect(remove).NotTo(HaveOccurred(), "RemovePodSandbox of the host-network pod")
				contract.Expect(leaks).To(BeClean())
			}, SpecTimeout(scenarioTimeout))
		})

	When("another pod's ADD hangs", KubeletScenario("hostnetwork-beside-hung-add", kubeletCase{
		family: kubeletBesideHang, hostNetwork: true, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
		},
	}),
		Label("fault:hang", scn.ShapeHostNetwork, "kubelet:host-network-beside-hang"), func() {
			BeforeEach(func(ctx SpecContext) {
				sc = newScenario(ctx)
				By("installing bridge, then cni-fault (ADD: hang once, then pass)")
				sc.InstallHangingAdd(ctx)
				DeferCleanup(sc.stopHungPlugins)
			}, NodeTimeout(scenarioSetupTimeout))

			It("starts the pod while the ADD hangs, and leaves nothing once both are removed", func(ctx SpecContext) {
				By("starting a host-network pod on the healthy network, and removing it")
				sc.takeBaseline(ctx)
				sc.startHostNetworkControl(ctx)

				By(fmt.Sprintf("starting a plain pod whose ADD hangs (its deadline %s)", hungPodDeadline))
				sc.RunStarted = time.Now()
				first := sc.StartPodsAtOnce(ctx, scn.Within(hungPodDeadline), 0, []int{0})
				hung := sc.expectHungAdd(ctx, first)

				_, run, stop, remove := sc.startHostNetworkPod(ctx)
				stillHung := host.Alive(hung)
				startedBeside := run == nil && stillHung
				sc.HostNetworkStarted = &startedBeside
				if run != nil || !stillHung {
					// The runtime's goroutines where the call stood, for
					// the diagnostics (goroutines.txt).
					_, _, _ = sc.stackDumps().take(ctx)
				}

				By("stopping the hung ADD and waiting for the plain pod's call")
				sc.stopHungPlugins()
				first.Wait()

				By("tearing down what the plain pod's call left, as kubelet does")
				sc.kubeletRemovesFailedSandboxes(ctx)

				By("inventorying the instance within the settle window")
				leaks, _ := sc.leaksSettle(ctx)
				contract.Expect(run).NotTo(HaveOccurred(), "the runtime did not start a host-network pod within kubelet's %s while another pod's ADD hung (cni-fault pid %d)", hostNetworkBound, hung)
				contract.Expect(stillHung).To(BeTrue(), "the host-network pod started only once the other pod's hung ADD (cni-fault pid %d) had ended: it was held behind it", hung)
				contract.Expect(stop).NotTo(HaveOccurred(), "StopPodSandbox of the host-network pod")
				contract.Expect(remove).NotTo(HaveOccurred(), "RemovePodSandbox of the host-network pod")
				contract.Expect(leaks).To(BeClean())
			}, SpecTimeout(scenarioTimeout+hungPodDeadline))
		})
})
