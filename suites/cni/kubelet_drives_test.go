package cni_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/cri"
	"github.com/cnifault/cnifault/fixtures/criproxy"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// The drives of kubelet mode (kubelet_mode_test.go): how each family of
// covered scenarios meets a real kubelet's pod, and how the pod's outcome
// is read once kubelet has settled.

// installQuietly installs the kubelet pod's network with cni-fault
// journaling and, but for a teardown (whose fault comes after the pod
// started), the case's faults in its faults file.
func (k *scenario) installQuietly(ctx SpecContext, kc kubeletCase) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("installing the kubelet pod's network: %v", r)
		}
	}()
	switch {
	case kc.family == kubeletHostNetwork, kc.breaks != nil && (kc.family == kubeletNoNetwork || kc.family == kubeletLateConfig):
		l := k.chain(k.Fault())
		if kc.chain != nil {
			if l, err = kc.chain(k); err != nil {
				return err
			}
		}
		if err := k.installListQuietly(ctx, l); err != nil {
			return err
		}
		return kc.breakNetwork(ctx, k)
	case kc.family == kubeletNoNetwork:
		return k.noNetworkQuietly(ctx, kc.conf)
	case kc.family == kubeletLateConfig:
		if kc.boot {
			return k.bootWithoutConfig(ctx)
		}
		return k.emptyConfDirQuietly(ctx)
	}
	if kc.family != kubeletTeardown && kc.faults != nil {
		f := kc.faults(k)
		if err := k.SetFaults(f.Faults); err != nil {
			return err
		}
		k.ExpectJournal(f, kc.verb)
	}
	if kc.expects != nil {
		kc.expects(k)
	}
	if kc.arms != nil {
		if err := kc.arms(ctx, k); err != nil {
			return fmt.Errorf("injecting the fault: %w", err)
		}
	}
	l := k.chain(k.Fault())
	if kc.first {
		l = cniconf.NewList(k.Network.Name, k.Fault(), k.Network.BridgePlugin())
	}
	if kc.chain != nil {
		if l, err = kc.chain(k); err != nil {
			return err
		}
	}
	if kc.refusable != "" {
		return k.installListOrRefusalQuietly(ctx, l, kc.refusable)
	}
	return k.installListQuietly(ctx, l)
}

// installListOrRefusalQuietly makes l the runtime's one network and waits
// until it holds it or refuses it for a reason that names because (CRI-O
// validates a list's plugins at load), as the plain run's
// InstallNetworkOrRefusal does, without asserting.
func (k *scenario) installListOrRefusalQuietly(ctx SpecContext, l cniconf.NetworkList, because string) error {
	if err := k.writeListQuietly(ctx, l); err != nil {
		return err
	}
	file := filepath.Join(rt.CNIConfDir(), confFile)
	return awaitNetwork(ctx, func(st cri.NetworkStatus) error {
		if why, refused := st.Refused[file]; refused && st.Unusable() {
			if !strings.Contains(why, because) {
				return fmt.Errorf("the runtime refused %s for a reason that does not name the fault: %s", file, why)
			}
			k.ExpectRefusal(why)
			return nil
		}
		return holds(l.Name)(st)
	})
}

// installListQuietly makes l the runtime's one network and waits until it
// holds it, without asserting.
func (k *scenario) installListQuietly(ctx SpecContext, l cniconf.NetworkList) error {
	if err := k.writeListQuietly(ctx, l); err != nil {
		return err
	}
	if err := awaitNetwork(ctx, holds(l.Name)); err != nil {
		return fmt.Errorf("the runtime did not load the kubelet pod's network %q: %w", l.Name, err)
	}
	return nil
}

// writeListQuietly writes l as the only config and tells the runtime; the
// plain run's writeList asserts on it.
func (k *scenario) writeListQuietly(ctx SpecContext, l cniconf.NetworkList) error {
	if err := k.UseList(l); err != nil {
		return err
	}
	dir := cniconf.ConfDir(rt.CNIConfDir())
	if err := dir.Clear(); err != nil {
		return err
	}
	if err := dir.WriteList(confFile, l); err != nil {
		return err
	}
	if err := runtimes.NetworkConfigChanged(ctx, rt); err != nil {
		return fmt.Errorf("the runtime did not take up the kubelet pod's network: %w", err)
	}
	return nil
}

// emptyConfDirQuietly empties the conf dir and waits until the runtime has
// no usable network (NetworkReady=false, or no network held), as the plain
// run's InstallNoNetwork does, without asserting.
func (k *scenario) emptyConfDirQuietly(ctx SpecContext) error {
	return k.noNetworkQuietly(ctx, nil)
}

// breakByEmptyConfDir is a case's breaks where the fault is an emptied
// conf dir: the runtime's own report of no usable network is how it fires.
func breakByEmptyConfDir(ctx SpecContext, k *scenario) error {
	k.ExpectNoNetwork()
	return k.emptyConfDirQuietly(ctx)
}

// withStatusList is a case's chain where the fault is STATUS's: the CNI
// 1.1.0 list whose STATUS passes, until breakByFailingStatus.
func withStatusList(k *scenario) (cniconf.NetworkList, error) { return k.statusList(k.Fault()), nil }

// breakByFailingStatus is a case's breaks where STATUS fails (makeStatusFail),
// and restoreStatus its clears.
func breakByFailingStatus(ctx SpecContext, k *scenario) error { return k.makeStatusFail(ctx) }
func restoreStatus(ctx SpecContext, k *scenario) error {
	return k.installListQuietly(ctx, k.statusList(k.Fault()))
}

// noNetworkQuietly makes content, which the runtime cannot load, the only
// config (none where nil), and waits until the runtime has no usable
// network; the plain run's InstallMalformed and emptyConfDir assert on it.
func (k *scenario) noNetworkQuietly(ctx SpecContext, content []byte) error {
	k.UseRaw(content)
	dir := cniconf.ConfDir(rt.CNIConfDir())
	if err := dir.Clear(); err != nil {
		return err
	}
	if content != nil {
		if err := dir.WriteRaw(confFile, content); err != nil {
			return err
		}
	}
	if err := runtimes.NetworkConfigChanged(ctx, rt); err != nil {
		return fmt.Errorf("the runtime did not take up the emptied conf dir: %w", err)
	}
	return awaitNetwork(ctx, func(st cri.NetworkStatus) error {
		if !st.Unusable() {
			return fmt.Errorf("the runtime still reports a usable network: %s %v", st.CNIConfig, st.Networks)
		}
		return nil
	})
}

// driveHostNetwork waits, within kubelet's deadline for the call, for the
// host-network pod that appeared under the fault to start, and deletes it.
func (k *scenario) driveHostNetwork(ctx SpecContext, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	if poll(ctx, kubeletStartBound+hostNetworkBound, func() bool { return k.readyPods(ctx) == len(k.PodUIDs()) }) {
		run.StartedAfterSeconds = time.Since(k.RunStarted).Round(time.Millisecond).Seconds()
	}
	run.Started = k.readyPods(ctx)
	if !k.seeFiredWithin(ctx, 0, calls) {
		return fmt.Errorf("the fault never fired: %s (kubelet's calls: %s)", k.Expectations(), criproxy.Summary(calls()))
	}
	first := criproxy.Counts(calls())["RunPodSandbox"]
	run.Why = fmt.Sprintf("under the fault: RunPodSandbox %d (%d failed), %d of %d pods started within %s",
		first.Calls, first.Failed, run.Started, len(k.PodUIDs()), kubeletStartBound+hostNetworkBound)
	return deletePod()
}

// rewriteRangeQuietly is config-change-during-hung-add's rewrite under
// kubelet: the plain run's (rewriteRange), and its wait until the runtime
// met the write (awaitRewriteMet), whose failure is returned.
func (k *scenario) rewriteRangeQuietly(ctx SpecContext) error {
	rewritten, marker, err := k.rewriteRange(ctx)
	if err != nil {
		return err
	}
	var met string
	if err := InterceptGomegaFailure(func() { met = k.awaitRewriteMet(ctx, k.stackDumps(), rewritten.Name, marker) }); err != nil {
		return err
	}
	GinkgoWriter.Printf("the runtime met the write: %s\n", met)
	return nil
}

// startHolder waits for the holder pod (pod 1) to start, then adds the pod
// under test.
func (k *scenario) startHolder(ctx SpecContext, calls func() []criproxy.Call, addPod func() error) error {
	if !poll(ctx, kubeletStartBound, func() bool { return k.readySandboxOf(ctx, k.PodUIDs()[1]) != "" }) {
		return fmt.Errorf("the holder pod did not start on the healthy network within %s (kubelet's calls: %s)",
			kubeletStartBound, criproxy.Summary(calls()))
	}
	return addPod()
}

// driveBesideHang waits for the first pod's ADD to hang, rewrites the conf
// dir where the case does, then adds the second pod (on the host network,
// where the case says so) and waits, within kubelet's deadline for its
// call (a plain pod: besideHangBound, as the plain run, and a sync), for it to
// start while the ADD still hangs; then the hung plugin is stopped
// (kubelet's retry of the first pod then passes) and both are deleted.
func (k *scenario) driveBesideHang(ctx SpecContext, kc kubeletCase, run *report.KubeletRun, calls func() []criproxy.Call, addSecondPod, deletePod func() error) error {
	if !k.seeFiredWithin(ctx, kubeletStartBound, calls) {
		return fmt.Errorf("the plain pod's ADD never hung within %s (%s; kubelet's calls: %s)",
			kubeletStartBound, k.Expectations(), criproxy.Summary(calls()))
	}
	hung, err := k.hungPID(cniconf.VerbAdd)
	if err != nil || hung == 0 {
		return fmt.Errorf("cni-fault's journal names no hung ADD (%v)", err)
	}
	defer k.stopHungPlugins()
	if kc.rewrite != nil {
		if err := kc.rewrite(ctx, k); err != nil {
			return fmt.Errorf("rewriting the conf dir while the first pod's ADD hangs: %w", err)
		}
	}
	bound, second := kubeletStartBound/2+besideHangBound, "the second pod"
	if kc.hostNetwork {
		bound, second = kubeletStartBound+hostNetworkBound, "the host-network pod"
	}
	appeared := time.Now()
	if err := addSecondPod(); err != nil {
		return err
	}
	uid := k.PodUIDs()[hostNetworkPod]
	ready := func() bool { return k.readySandboxOf(ctx, uid) != "" }
	if poll(ctx, bound, ready) && host.Alive(hung) {
		run.Started = 1
		run.StartedAfterSeconds = time.Since(appeared).Round(time.Millisecond).Seconds()
	}
	run.Why = fmt.Sprintf("%s appeared %.1f s after the first manifest, while the first pod's ADD hung (cni-fault pid %d); "+
		"it started within %s while the ADD still hung: %v", second, appeared.Sub(k.RunStarted).Seconds(), hung, bound, run.Started == 1)
	k.stopHungPlugins()
	return deletePod()
}

// driveAcrossRestart waits for the pod and its container to run, kills and
// restarts the runtime under it, then kills the container's process (the
// pod's own, by its PID) so that kubelet's next sync makes a new one, and
// records what kubelet made: a new container in the same sandbox, mapped
// as the pod or not, or a new sandbox; then the pod is deleted.
func (k *scenario) driveAcrossRestart(ctx SpecContext, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	ctl, ok := rt.(runtimes.Controllable)
	if !ok {
		return fmt.Errorf("the harness does not control this runtime's process: it cannot restart it")
	}
	restarted := false
	k.ExpectFault("the runtime to be killed by its PID and started again under the pod", func(context.Context) (string, bool) {
		return "runtime killed by its PID and restarted", restarted
	})
	var sandbox, ctr string
	if !poll(ctx, kubeletStartBound, func() bool {
		sandbox, ctr = k.readySandbox(ctx), startedContainer(calls(), time.Time{})
		return sandbox != "" && ctr != ""
	}) {
		if why := k.refusedUserNS(ctx, calls()); why != "" {
			run.Why = why
			return deletePod()
		}
		if c, ok := lastFailed(calls(), "CreateContainer"); ok {
			return fmt.Errorf("the kubelet's pod started on the healthy network, but its container did not within %s: kubelet's CreateContainer failed: %s (kubelet's calls: %s)",
				kubeletStartBound, c.Message, criproxy.Summary(calls()))
		}
		return fmt.Errorf("the kubelet's pod and its container did not start on the healthy network within %s (kubelet's calls: %s)",
			kubeletStartBound, criproxy.Summary(calls()))
	}
	pause, err := k.SandboxPID(ctx, sandbox)
	if err != nil {
		return fmt.Errorf("the pod's pause pid: %w", err)
	}
	podMap, err := scn.UIDMapOf(pause)
	if err != nil {
		return fmt.Errorf("the pod's uid_map: %w", err)
	}
	pid, err := k.ContainerPID(ctx, ctr)
	if err != nil {
		return fmt.Errorf("the pod's container's pid: %w", err)
	}
	if err := ctl.Crash(ctx); err != nil {
		return fmt.Errorf("killing the runtime under the pod: %w", err)
	}
	if err := ctl.Restart(ctx); err != nil {
		return fmt.Errorf("starting the runtime again: %w", err)
	}
	restarted = true
	after := time.Now()
	// The container's process, started by the runtime for this pod: its
	// death is what makes kubelet sync the pod at once.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing the pod's container (pid %d): %w", pid, err)
	}
	var next string
	poll(ctx, kubeletStartBound+kubeletQuiet, func() bool {
		cs := calls()
		if ran, _ := lastOf(since(cs, after), "RunPodSandbox"); ran.Method != "" {
			run.AcrossRestart = report.PodAcrossRecreated
			return true
		}
		if next = startedContainer(cs, after); next != "" {
			return true
		}
		if c, n := lastOf(since(cs, after), "CreateContainer"); n > 0 && c.Failed() {
			run.AcrossRestart = report.PodAcrossContainerFailed
		}
		return false
	})
	if next != "" {
		pid, err := k.ContainerPID(ctx, next)
		if err != nil {
			return fmt.Errorf("the pod's new container's pid: %w", err)
		}
		m, err := scn.UIDMapOf(pid)
		if err != nil {
			return fmt.Errorf("the pod's new container's uid_map: %w", err)
		}
		run.AcrossRestart = report.PodAcrossKept
		if m != podMap {
			run.AcrossRestart = report.PodAcrossContainerUnmapped
		}
		run.Why = fmt.Sprintf("after the restart kubelet made container %.12s in the pod: uid_map %q, the pod's %q", next, m, podMap)
	}
	if run.AcrossRestart == "" {
		return fmt.Errorf("kubelet made neither a container nor a sandbox for the pod within %s after the restart and its container's kill (kubelet's calls: %s)",
			kubeletStartBound+kubeletQuiet, criproxy.Summary(calls()))
	}
	if run.Why == "" {
		run.Why = "after the restart: " + run.AcrossRestart
	}
	return deletePod()
}

// startedContainer is the id of the last container kubelet started (a
// StartContainer that succeeded) at or after t, or "".
func startedContainer(calls []criproxy.Call, t time.Time) string {
	c, n := lastOf(since(calls, t), "StartContainer")
	if n == 0 || c.Failed() || c.InFlight {
		return ""
	}
	return c.ContainerID
}

// since is the calls that started at or after t.
func since(calls []criproxy.Call, t time.Time) []criproxy.Call {
	return slices.DeleteFunc(slices.Clone(calls), func(c criproxy.Call) bool { return c.Start.Before(t) })
}

// driveNoNetwork watches the pod for kubeletNoCallWindow while the runtime
// has no usable network, and deletes it. The fault is the runtime's state,
// checked again at the end of the window.
func (k *scenario) driveNoNetwork(ctx SpecContext, calls func() []criproxy.Call, deletePod func() error) error {
	poll(ctx, kubeletNoCallWindow, func() bool { return criproxy.Counts(calls())["RunPodSandbox"].Calls > 0 })
	st, err := runtimes.Network(ctx, rt)
	if err != nil || !st.Unusable() {
		return fmt.Errorf("the runtime's network was usable again by the end of the window (%v): the fault did not hold", err)
	}
	return deletePod()
}

// bootWithoutConfig empties the conf dir and restarts a managed runtime
// with it empty, as a node boots (a CRI-O that never was ready holds
// RunPodSandbox until a network loads), as the plain run does.
func (k *scenario) bootWithoutConfig(ctx SpecContext) error {
	if err := k.emptyConfDirQuietly(ctx); err != nil {
		return err
	}
	ctl, ok := rt.(runtimes.Controllable)
	if !ok {
		return nil
	}
	if err := ctl.Crash(ctx); err != nil {
		return fmt.Errorf("stopping the runtime for the node's boot: %w", err)
	}
	if err := ctl.Restart(ctx); err != nil {
		return fmt.Errorf("starting the runtime with its conf dir empty: %w", err)
	}
	return k.emptyConfDirQuietly(ctx)
}

// driveLateConfig lets kubelet attempt the pods while no config exists
// (until each made a RunPodSandbox, or kubeletNoCallWindow where they make
// none), writes the config as the network DaemonSet does, waits for the
// pods to start, and deletes them.
func (k *scenario) driveLateConfig(ctx SpecContext, kc kubeletCase, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	poll(ctx, kubeletNoCallWindow, func() bool { return len(asked(calls())) == len(k.PodUIDs()) })
	st, err := runtimes.Network(ctx, rt)
	if err != nil || !st.Unusable() {
		return fmt.Errorf("the runtime's network was usable before the config was written (%v): the fault did not hold", err)
	}
	before := criproxy.Counts(calls())["RunPodSandbox"]
	until := "the config"
	if kc.clears != nil {
		until = "the fault cleared"
	}
	run.Why = fmt.Sprintf("before %s: RunPodSandbox %d (%d failed, %d in flight)", until, before.Calls, before.Failed, before.InFlight)
	return k.clearThenStart(ctx, run, func() error {
		if kc.clears != nil {
			return kc.clears(ctx, k)
		}
		return k.installListQuietly(ctx, cniconf.BridgeList(k.Network))
	}, deletePod)
}

// clearThenStart ends the fault (clear), waits until every pod of the run
// has a ready sandbox (kubelet's next retry starts each), records when,
// and deletes the pods.
func (k *scenario) clearThenStart(ctx SpecContext, run *report.KubeletRun, clear, deletePod func() error) error {
	if err := clear(); err != nil {
		return fmt.Errorf("ending the fault: %w", err)
	}
	run.ClearedAfterSeconds = time.Since(k.RunStarted).Round(time.Millisecond).Seconds()
	if poll(ctx, kubeletClearedStartBound, func() bool { return k.readyPods(ctx) == len(k.PodUIDs()) }) {
		run.StartedAfterSeconds = time.Since(k.RunStarted).Round(time.Millisecond).Seconds()
	}
	run.Started = k.readyPods(ctx)
	return deletePod()
}

// driveStorm lets every pod of the storm meet the fault at its first
// attempt, clears the fault, and lets kubelet start them all before they
// are deleted, as the plain storm retries its pods once the fault cleared.
func (k *scenario) driveStorm(ctx SpecContext, kc kubeletCase, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	if !k.seeFiredWithin(ctx, kubeletStartBound, calls) {
		return fmt.Errorf("the fault never fired for the kubelet's pods within %s (%s; kubelet's calls: %s)",
			kubeletStartBound, k.Expectations(), criproxy.Summary(calls()))
	}
	returned := kubeletStartBound + kc.hungRun()
	if !poll(ctx, returned, func() bool { return len(attempted(calls())) == len(k.PodUIDs()) }) {
		return fmt.Errorf("only %d of the storm's %d pods had a RunPodSandbox return within %s (kubelet's calls: %s)",
			len(attempted(calls())), len(k.PodUIDs()), returned, criproxy.Summary(calls()))
	}
	first := criproxy.Counts(calls())["RunPodSandbox"]
	run.Why = fmt.Sprintf("under the fault: RunPodSandbox %d (%d failed)", first.Calls, first.Failed)
	return k.clearThenStart(ctx, run, func() error { return kc.clearFault(ctx, k) }, deletePod)
}

// driveFailedStart waits for the fault to fire in kubelet's first
// RunPodSandbox, lets kubelet retry where the case retries, and deletes
// the pod.
func (k *scenario) driveFailedStart(ctx SpecContext, kc kubeletCase, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	if !k.seeFiredWithin(ctx, kubeletStartBound, calls) {
		if why := k.refusedUserNS(ctx, calls()); why != "" {
			run.Why = why
			return deletePod()
		}
		return fmt.Errorf("the fault never fired for the kubelet's pod within %s (%s; kubelet's calls: %s)",
			kubeletStartBound, k.Expectations(), criproxy.Summary(calls()))
	}
	if kc.family == kubeletRetries {
		poll(ctx, kubeletRetryBound+kubeletRetryAttempts*kc.hungRun(), func() bool {
			return criproxy.Counts(calls())["RunPodSandbox"].Calls >= kubeletRetryAttempts
		})
	}
	if err := deletePod(); err != nil || !kc.killed {
		return err
	}
	return k.killMidAdd(ctx)
}

// refusedUserNS says why kubelet made no RunPodSandbox for a hostUsers:
// false pod, where the runtime's CRI Status does not say its default
// handler supports user namespaces: kubelet then refuses the pod before
// any call (pkg/kubelet/userns GetOrCreateUserNamespaceMappings at
// v1.34.12, "runtime does not support user namespaces"), though the
// runtime may run one a CRI client asks for (containerd 1.7). "" where
// that is not so.
func (k *scenario) refusedUserNS(ctx context.Context, calls []criproxy.Call) string {
	if k.Shape.UserNS == nil || criproxy.Counts(calls)["RunPodSandbox"].Calls > 0 {
		return ""
	}
	st, err := rt.CRI().Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return ""
	}
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" && h.GetFeatures().GetUserNamespaces() {
			return ""
		}
	}
	return "kubelet made no RunPodSandbox for the hostUsers: false pod: the runtime's CRI Status does not say its default handler " +
		"supports user namespaces, and kubelet refuses such a pod before any call (its user namespace manager at v1.34.12)"
}

// killMidAdd kills the runtime by its PID while the pod's ADD hangs, stops
// the hung plugins and starts the runtime again, as the plain run does.
func (k *scenario) killMidAdd(ctx SpecContext) error {
	ctl, ok := rt.(runtimes.Controllable)
	if !ok {
		return fmt.Errorf("the harness does not control this runtime's process: it cannot kill it")
	}
	if err := ctl.Crash(ctx); err != nil {
		return fmt.Errorf("killing the runtime while ADD hangs: %w", err)
	}
	k.stopHungPlugins()
	if err := ctl.Restart(ctx); err != nil {
		return fmt.Errorf("starting the runtime again: %w", err)
	}
	return nil
}

// driveTeardown starts the pod on the healthy network, breaks it, deletes
// the pod, and records whether it went while the fault persisted; then it
// clears the fault.
func (k *scenario) driveTeardown(ctx SpecContext, kc kubeletCase, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	var id string
	if !poll(ctx, kubeletStartBound, func() bool {
		id = k.readySandbox(ctx)
		return id != ""
	}) {
		return fmt.Errorf("the kubelet's pod did not start on the healthy network within %s (kubelet's calls: %s)",
			kubeletStartBound, criproxy.Summary(calls()))
	}
	if err := kc.breakNetwork(ctx, k); err != nil {
		return fmt.Errorf("breaking the kubelet pod's network: %w", err)
	}
	if err := deletePod(); err != nil {
		return err
	}
	deletedAt := time.Now()
	// stops are kubelet's StopPodSandbox calls since the deletion that
	// ended: how many failed, and whether one succeeded (the pod's kill
	// went through: it is gone for its user, its sandbox left to
	// kubelet's GC).
	stops := func() (failed int, killed bool) {
		for _, c := range calls() {
			if c.Method != "StopPodSandbox" || c.InFlight || c.Start.Before(deletedAt) {
				continue
			}
			if c.Failed() {
				failed++
			} else {
				killed = true
			}
		}
		return failed, killed
	}
	gone := func() bool {
		_, killed := stops()
		return killed || !k.listsSandbox(ctx)
	}
	if kc.restart != nil {
		// The runtime restarts between kubelet's first failed Stop and
		// its next, which meets the restarted runtime.
		poll(ctx, kubeletFaultedBound, func() bool {
			failed, _ := stops()
			return gone() || failed > 0
		})
		if failed, _ := stops(); failed > 0 && !gone() {
			if err := kc.restart(ctx); err != nil {
				return fmt.Errorf("restarting the runtime between kubelet's Stops: %w", err)
			}
		}
	}
	poll(ctx, kubeletFaultedBound, func() bool {
		failed, _ := stops()
		return gone() || failed >= kubeletFaultedStops
	})
	if !k.seeFiredWithin(ctx, 0, calls) {
		return fmt.Errorf("the fault never fired for the kubelet's pod: %s (kubelet's calls: %s)", k.Expectations(), criproxy.Summary(calls()))
	}
	run.WhileFaulted = report.KubeletRemoved
	if !gone() {
		run.WhileFaulted = report.KubeletStuckTerminating
	}
	if err := kc.clearFault(ctx, k); err != nil {
		return fmt.Errorf("clearing the fault: %w", err)
	}
	return nil
}

// asked is the pods (by uid) kubelet made a RunPodSandbox for, returned
// or not (a CRI-O that never was ready holds it).
func asked(calls []criproxy.Call) map[string]bool {
	out := map[string]bool{}
	for _, c := range calls {
		if c.Method == "RunPodSandbox" {
			out[c.Pod.UID] = true
		}
	}
	return out
}

// attempted is the pods (by uid) with a RunPodSandbox that returned.
func attempted(calls []criproxy.Call) map[string]bool {
	out := map[string]bool{}
	for _, c := range calls {
		if c.Method == "RunPodSandbox" && !c.InFlight {
			out[c.Pod.UID] = true
		}
	}
	return out
}

// lastFailed is the last of calls to method that failed.
func lastFailed(calls []criproxy.Call, method string) (criproxy.Call, bool) {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Method == method && calls[i].Failed() {
			return calls[i], true
		}
	}
	return criproxy.Call{}, false
}

// settleUnderKubelet waits until the deleted pod is done with (no sandbox
// of it listed, and no call of kubelet's for it for kubeletQuiet), or
// kubeletSettleBound has passed, and judges the outcome and what was left.
func (k *scenario) settleUnderKubelet(ctx SpecContext, run *report.KubeletRun, calls func() []criproxy.Call) {
	before := run.Why
	poll(ctx, kubeletSettleBound, func() bool {
		if k.listsSandbox(ctx) {
			return false
		}
		return quietSince(calls()) > kubeletQuiet
	})
	if err := k.Inventory(ctx); err != nil {
		run.Error = "taking the inventory: " + err.Error()
		return
	}
	k.FinishInspection(k.journal)
	run.Leaks = append([]report.Leak(nil), k.Scenario.Leaks...)
	cs := calls()
	counts := criproxy.Counts(cs)
	run.Attempts = counts["RunPodSandbox"].Calls
	if run.Pods <= 1 {
		// A rate is one pod's: a storm's pods retry side by side.
		run.RetrySeconds = retrySeconds(cs)
		run.IdleSeconds = meanSeconds(criproxy.IdleAfterAttempts(cs))
	}
	lastStop, stops := lastOf(cs, "StopPodSandbox")
	switch {
	case run.Attempts == 0 && before != "":
		run.Outcome, run.Why, before = report.KubeletNeverAttempted, before, ""
	case run.Attempts == 0:
		run.Outcome, run.Why = report.KubeletNeverAttempted, fmt.Sprintf(
			"kubelet made no RunPodSandbox for the pod in %s while the runtime had no usable network", kubeletNoCallWindow)
	case !k.listsSandbox(ctx):
		run.Outcome, run.Why = report.KubeletRemoved, "no sandbox of the deleted pod is left"
	case stops > 0 && !lastStop.Failed() && !lastStop.InFlight:
		run.Outcome, run.Why = report.KubeletRemoved, fmt.Sprintf(
			"its last StopPodSandbox succeeded; kubelet's GC had not removed the sandbox %s after the deletion", kubeletSettleBound)
	default:
		run.Outcome, run.Why = report.KubeletStuckTerminating, fmt.Sprintf(
			"a sandbox of the deleted pod is still there after %s, and %d of kubelet's StopPodSandbox calls failed",
			kubeletSettleBound, counts["StopPodSandbox"].Failed)
	}
	switch {
	case run.ClearedAfterSeconds > 0 && run.StartedAfterSeconds > 0:
		run.Why = fmt.Sprintf("%s; every pod started %.1f s after the fault cleared; deleted: %s", before, run.StartedAfterSeconds-run.ClearedAfterSeconds, run.Why)
	case run.ClearedAfterSeconds > 0:
		run.Why = fmt.Sprintf("%s; %d of %d pods started within %s after the fault cleared; deleted: %s", before, run.Started, len(k.PodUIDs()),
			kubeletClearedStartBound, run.Why)
	case run.WhileFaulted != "":
		run.Why = fmt.Sprintf("while faulted: %s; once cleared: %s", run.WhileFaulted, run.Why)
	case before != "":
		run.Why = fmt.Sprintf("%s; deleted: %s", before, run.Why)
	}
}

// seeFiredWithin polls for the fault's firing for up to d. The runtime's
// words for kubelet's failed calls are the harness's to read too: the
// proxy has them, for a fault only they show (ExpectRuntimeError,
// ExpectConfigFault).
func (k *scenario) seeFiredWithin(ctx SpecContext, d time.Duration, calls func() []criproxy.Call) bool {
	fired := func() bool {
		cs := calls()
		if last, ok := lastFailed(cs, "RunPodSandbox"); ok {
			k.Error = last.Message
		}
		if last, ok := lastFailed(cs, "StopPodSandbox"); ok {
			k.StopErr = last.Message
		}
		return k.SeeFired(ctx)
	}
	if fired() {
		return true
	}
	return d > 0 && poll(ctx, d, fired)
}

// readySandbox is the id of the kubelet pod's ready sandbox, "" while
// there is none.
func (k *scenario) readySandbox(ctx context.Context) string { return k.readySandboxOf(ctx, k.PodUID()) }

// readySandboxOf is the id of a ready sandbox of the pod uid, or "".
func (k *scenario) readySandboxOf(ctx context.Context, uid string) string {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return ""
	}
	for _, b := range boxes {
		if b.GetMetadata().GetUid() == uid && b.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return b.GetId()
		}
	}
	return ""
}

// readyPods is how many of the run's pods have a ready sandbox.
func (k *scenario) readyPods(ctx context.Context) int {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return 0
	}
	ready := map[string]bool{}
	for _, b := range boxes {
		if uid := b.GetMetadata().GetUid(); slices.Contains(k.PodUIDs(), uid) && b.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready[uid] = true
		}
	}
	return len(ready)
}

// listsSandbox tells whether the runtime lists any sandbox of the kubelet
// pod; a failed listing counts as one (not gone).
func (k *scenario) listsSandbox(ctx context.Context) bool {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return true
	}
	for _, b := range boxes {
		if slices.Contains(k.PodUIDs(), b.GetMetadata().GetUid()) {
			k.Scope.MarkOwn(b.GetId())
			return true
		}
	}
	return false
}

// poll calls done every second until it holds or d has passed; it tells
// whether it held. A quiet Gomega: kubelet mode asserts nothing.
func poll(ctx context.Context, d time.Duration, done func() bool) bool {
	quiet := NewGomega(func(string, ...int) {})
	return quiet.Eventually(done).WithContext(ctx).WithTimeout(d).WithPolling(time.Second).Should(BeTrue())
}

// quietSince is how long kubelet has made no call for the pod: since the
// end of its last one; none while one is in flight.
func quietSince(calls []criproxy.Call) time.Duration {
	var last time.Time
	for _, c := range calls {
		if c.InFlight {
			return 0
		}
		if end := c.Start.Add(c.Duration); end.After(last) {
			last = end
		}
	}
	if last.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(last)
}

// retrySeconds is the mean time from one of kubelet's RunPodSandbox calls
// for the pod to the next; 0 with fewer than two.
func retrySeconds(calls []criproxy.Call) float64 {
	var starts []time.Time
	for _, c := range calls {
		if c.Method == "RunPodSandbox" {
			starts = append(starts, c.Start)
		}
	}
	if len(starts) < 2 {
		return 0
	}
	d := starts[len(starts)-1].Sub(starts[0]) / time.Duration(len(starts)-1)
	return d.Round(100 * time.Millisecond).Seconds()
}

// meanSeconds is the mean of ds in seconds, to a tenth; 0 for none.
func meanSeconds(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(100 * time.Millisecond).Seconds()
}

func lastOf(calls []criproxy.Call, method string) (criproxy.Call, int) {
	var last criproxy.Call
	n := 0
	for _, c := range calls {
		if c.Method == method {
			last, n = c, n+1
		}
	}
	return last, n
}

// fillCalls puts kubelet's calls for the pod into the run, per method.
func fillCalls(run *report.KubeletRun, calls []criproxy.Call) {
	run.Calls = nil
	for _, m := range criproxy.Methods(calls) {
		c := criproxy.Counts(calls)[m]
		run.Calls = append(run.Calls, report.KubeletCalls{Method: m, Calls: c.Calls, Failed: c.Failed})
	}
}
