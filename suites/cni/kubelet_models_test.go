package cni_test

import (
	"fmt"
	"slices"

	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// What each scenario's calls stand for in a real kubelet (report.json
// "kubelet"): the calls, in kubelet's order, compressed in time. The
// windows and deadlines in them are the code's own values.
var (
	modelFirstAttempt = "kubelet's first RunPodSandbox of a pod (attempt 0); the reclaim then stops and removes " +
		"every sandbox the failed call left, as kubelet's next syncs do (" + reclaimSyncs.String() + "), with the fault in place"
	modelRestartAfterKill = "kubelet's RunPodSandbox while the runtime is killed; once it restarts, kubelet's Stop and Remove " +
		"of every sandbox the dead call left"
	modelStatus = "kubelet's runtime Status poll (every " + kubeletStatusPeriod.String() + "), whose NetworkReady gates new pods, " +
		"and a pod's life (RunPodSandbox, StopPodSandbox, RemovePodSandbox) beside it; here CRI Status is polled " + statusPolls.String()
	modelGC       = "kubelet keeps its pods running or deleted while the runtime runs CNI GC on its own"
	modelTeardown = "kubelet deleting a running pod: StopPodSandbox, then RemovePodSandbox, on every sync " +
		fmt.Sprintf("(%s, %s where DEL hangs; each call within kubelet's %s, or %s after DEL hangs), ",
			teardownSyncs(teardownWindow), teardownHangWindow, criCallTimeout, teardownHangAfter) +
		"while the fault persists and again once it clears"
	modelTeardownRestart = modelTeardown + "; the runtime is killed and restarted after the first failed Stop"
	modelStorm           = "kubelet starting many pods at once (a node boot, a rollout): RunPodSandbox of each at attempt 0 " +
		"at the same time; once the fault clears, Stop and Remove of every failed sandbox, then RunPodSandbox of each at attempt 1"
	modelSustained = report.KubeletRetryModel + "; here each attempt follows the last one's Stop and Remove as soon as " +
		"what it left is counted (where ADD hangs, once that settled, for up to " + sustainedSettleWindow.String() +
		", kubelet's backOffPeriod, and at least " + fmt.Sprint(scn.MinRounds) + " inventories)"
	modelRetryRestart = "kubelet's RunPodSandbox of a pod on each sync until it starts (attempt 0 each time: no sandbox of " +
		"the pod is listed), then the runtime is killed and restarted, then kubelet's Stop and Remove of the pod"

	modelPodBesideHang = "kubelet starting a second pod (RunPodSandbox at attempt 0, kubelet's 2 min deadline) while the " +
		"first pod's RunPodSandbox hangs in ADD and a CNI agent rewrites its conflist; then Stop and Remove of what both " +
		"calls left, as kubelet's next syncs do"
	modelNodeReboot = "a node reboot with the pods running: once the runtime is up again, kubelet lists the old sandboxes " +
		"and stops and removes each (StopPodSandbox, then RemovePodSandbox, on every sync: " + teardownSyncs(teardownWindow).String() +
		", each call within kubelet's " + criCallTimeout.String() + ")"
	modelPodAcrossRestart = "kubelet's pod living through a runtime restart: RunPodSandbox; the runtime is killed and " +
		"restarted; kubelet's next sync starts a container in the pod (CreateContainer and StartContainer, with the pod's " +
		"user namespace, each within kubelet's " + criCallTimeout.String() + "); then Stop and Remove of the pod"
	modelHostNetwork = "kubelet starting a host-network pod (a CNI's own DaemonSet pod: kubelet admits host-network pods " +
		"while NetworkReady is false) with RunPodSandbox at attempt 0 within kubelet's " + criCallTimeout.String() +
		" runtime-request-timeout, after one such pod started and was removed on the healthy network; then Stop and Remove"
	modelHostNetworkBesideHang = "kubelet starting a host-network pod (RunPodSandbox at attempt 0 within kubelet's " +
		criCallTimeout.String() + " runtime-request-timeout) while another pod's RunPodSandbox hangs in ADD; then Stop and " +
		"Remove of both, as kubelet's next syncs do"
	modelLateConfig = "a node boot: the runtime starts with no CNI config and RunPodSandbox comes at once, with " +
		"kubelet's 2 min deadline (a call the runtime holds resumes when the config appears); then Stop and Remove of " +
		"the early sandboxes, and RunPodSandbox of each pod at attempt 1"
)

// kubeletModel is the kubelet behaviour a scenario models: the one its
// kubelet:<model> label declares, or else its family's.
func kubeletModel(labels []string) string {
	has := func(l string) bool { return slices.Contains(labels, l) }
	switch {
	case has("kubelet:teardown-restart"):
		return modelTeardownRestart
	case has("kubelet:retry-restart"):
		return modelRetryRestart
	case has("kubelet:runtime-restart"):
		return modelRestartAfterKill
	case has("kubelet:node-reboot"):
		return modelNodeReboot
	case has("kubelet:node-boot"):
		return modelLateConfig
	case has("kubelet:pod-beside-hang"):
		return modelPodBesideHang
	case has("kubelet:pod-across-restart"):
		return modelPodAcrossRestart
	case has("kubelet:host-network"):
		return modelHostNetwork
	case has("kubelet:host-network-beside-hang"):
		return modelHostNetworkBesideHang
	case has(report.LabelTeardown):
		return modelTeardown
	case has(report.LabelStorm):
		return modelStorm
	case has(report.LabelSustained):
		return modelSustained
	case has("fault:status"):
		return modelStatus
	case has("gc"), has("fault:gc"):
		return modelGC
	}
	return modelFirstAttempt
}
