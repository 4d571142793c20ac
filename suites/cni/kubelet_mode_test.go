package cni_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/criproxy"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/kubelet"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Kubelet mode (`cnifault --kubelet`): after a covered scenario's plain
// run, once its instance is clean again, the same fault meets a real
// kubelet's pod: a static pod appears, the fault fires, the pod is deleted
// as a user deletes it (its manifest removed), and what kubelet made of it
// is judged on the node's inventory once kubelet has settled. The plain
// run's verdict rests on the harness's model of kubelet; this checks the
// model (verdict.JudgeKubelet). It never changes the plain verdict: it
// asserts nothing, and what it saw goes into the report's kubelet_run.

// kubeletFamily is how a covered scenario's pod meets the fault.
type kubeletFamily int

const (
	// kubeletFirstAttempt: the pod's first RunPodSandbox meets the fault;
	// the user deletes the pod once it fired.
	kubeletFirstAttempt kubeletFamily = iota
	// kubeletRetries: the pod is left to kubelet's retries for as many
	// attempts as the sustained scenario makes, then deleted.
	kubeletRetries
	// kubeletTeardown: the pod starts on a healthy network, the fault
	// breaks it, the user deletes the pod; the fault clears later.
	kubeletTeardown
	// kubeletNoNetwork: the pod appears while the runtime has no usable
	// network; kubelet makes no RunPodSandbox while the runtime says
	// NetworkReady=false (a CRI-O that was ready once still says true).
	kubeletNoNetwork
	// kubeletLateConfig: the runtime starts with its conf dir empty, as a
	// node boots before its CNI DaemonSet (or, with breaks, its network
	// broken: STATUS failing); the pod appears, then the config does (or
	// clears ends the fault), and the pod must start before it is
	// deleted.
	kubeletLateConfig
	// kubeletReboot: the pods run on a healthy network when the node
	// reboots under them, kubelet with it; once the runtime and kubelet
	// are up again and every pod runs again, the pods are deleted.
	kubeletReboot
	// kubeletHostNetwork: a host-network pod (a CNI's own DaemonSet pod)
	// appears once the network broke (breaks); kubelet admits it while
	// NetworkReady is false, and it must start within kubelet's deadline
	// before it is deleted.
	kubeletHostNetwork
	// kubeletAcrossRestart: the pod runs on a healthy network when the
	// runtime is killed and restarted under it; then its container is
	// killed, and kubelet's next sync makes a new container in the pod (or,
	// where the pod changed for kubelet, a new sandbox) before it is
	// deleted.
	kubeletAcrossRestart
	// kubeletBesideHang: a pod's ADD hangs (faults); the case's rewrite,
	// where set, changes the conf dir as a CNI agent does; then a second
	// pod (on the host's network, with hostNetwork) appears and must start
	// while the ADD still hangs, before both are deleted.
	kubeletBesideHang
	// kubeletRetryRestart: an NRI plugin rejects the pod's first
	// RunPodSandbox calls (arms), kubelet retries until one is allowed,
	// then the runtime is killed and restarted under the started pod,
	// which is then deleted.
	kubeletRetryRestart
)

// errRuntimeDown ends a drive whose runtime did not come back from a
// restart the scenario made: a result, not an error of the run; nothing
// can settle on a runtime that is down.
var errRuntimeDown = errors.New("the runtime did not come back after the restart")

// kubeletCase is a covered scenario's fault for its kubelet run: data, as
// the plain run's is. faults is written into the kubelet pod's cni-fault
// faults file (before the pod for the first two families, after it
// started for the teardown), and verb is the verb whose journal entry
// shows it fired.
type kubeletCase struct {
	family kubeletFamily
	faults func(k *scenario) cniconf.Fault
	verb   cniconf.Verb
	// first puts cni-fault before bridge, as the plain run does where
	// nothing may be allocated when the fault fires; else it follows
	// bridge.
	first bool
	// chain, where set, is the pod's chain instead (a teardown's healthy
	// network that holds more than bridge and cni-fault).
	chain func(k *scenario) (cniconf.NetworkList, error)
	// breaks and clears, where set, break a live pod's network and end the
	// fault (a teardown whose fault is not cni-fault's: an emptied conf
	// dir, a removed plugin binary, STATUS failing); breaks registers how
	// the fault is seen to fire. Else faults is written into the faults
	// file, its verb's journal entry is the check, and clearing empties
	// the file. For kubeletNoNetwork and kubeletHostNetwork, breaks breaks
	// the healthy network before the pod appears.
	breaks, clears func(ctx SpecContext, k *scenario) error
	// restart, where set, restarts the runtime between kubelet's first
	// failed Stop of a teardown and its next.
	restart func(ctx SpecContext) error
	// storm: tc.StormPods static pods appear at once (a node's boot, a
	// rollout), each its own pod worker in kubelet, and the fault ends
	// before they are deleted: every one must start, as the plain storm
	// retries its pods once the fault cleared. With kubeletFirstAttempt
	// the fault clears once every pod's first RunPodSandbox met it; with
	// kubeletLateConfig the config appears.
	storm bool
	// conf, for kubeletNoNetwork, is the only config, which the runtime
	// cannot load; none where nil.
	conf []byte
	// expects, where set, registers how a fault cni-fault does not
	// inject is seen to fire (the runtime's error naming it); refusable,
	// where set, lets the runtime refuse the pod's list at load for a
	// reason that names it, as CRI-O does a list whose plugin is missing.
	expects   func(k *scenario)
	refusable string
	// arms, where set, injects before the pod appears a fault beside the
	// network (an NRI plugin's rejection, the runtime's sandbox image
	// removed) and registers how it is seen to fire and how it is undone.
	arms func(ctx SpecContext, k *scenario) error
	// killed: the runtime is killed by its PID while the pod's ADD hangs,
	// after the pod's deletion (so that kubelet, once the runtime is back,
	// only stops and removes what the dead call left, as the plain run
	// does), the hung plugins stopped, and the runtime started again.
	killed bool
	// hang: the fault is a call that hangs (cni-fault's hang, which only
	// the harness ends: clearing the fault stops the hung invocations).
	// The kubelet runs with kubeletHangRequestTimeout, so that each hung
	// call ends at its deadline within a bound a pod meets.
	hang bool
	// holder, for kubeletFirstAttempt: a healthy pod (pod 1) appears first
	// and must start, holding what the fault needs held (dual-stack-
	// partial's IPv6 range's only address); then the pod under test
	// (pod 0) appears. Both are deleted together.
	holder bool
	// hostNetwork, for kubeletBesideHang: the second pod (pod
	// hostNetworkPod) runs on the host's network.
	hostNetwork bool
	// rewrite, for kubeletBesideHang, changes the conf dir once the first
	// pod's ADD hangs, and waits until the runtime has met the write.
	rewrite func(ctx SpecContext, k *scenario) error
	// boot restarts a managed runtime with its conf dir empty before a
	// late config's pods appear, as a node boots (a CRI-O that never was
	// ready holds RunPodSandbox until a network loads).
	boot bool
}

// breakNetwork breaks the kubelet pod's live network with the case's fault.
func (kc kubeletCase) breakNetwork(ctx SpecContext, k *scenario) error {
	if kc.breaks != nil {
		return kc.breaks(ctx, k)
	}
	f := kc.faults(k)
	if err := k.SetFaults(f.Faults); err != nil {
		return err
	}
	k.ExpectJournal(f, kc.verb)
	return nil
}

// clearFault ends the case's fault on the kubelet pod's network, and the
// invocations it left hanging with it, as the agent that hung comes back.
func (kc kubeletCase) clearFault(ctx SpecContext, k *scenario) error {
	if kc.clears != nil {
		return kc.clears(ctx, k)
	}
	err := k.SetFaults(nil)
	k.stopHungPlugins()
	return err
}

// expectedSeconds is about how long the case's kubelet run takes, by what
// it waits for (kubelet's backoff between attempts, a hung call's
// deadline, a GC period while the fault persists, a restart): the kubelet
// runs of make test's kubelet mode on containerd 2.4.2, 2026-12-07, in 16
// processes. It only orders the scenarios, longest first (progress_test.go),
// so that a parallel kubelet run does not start a 3-minute one last.
func (kc kubeletCase) expectedSeconds() float64 {
	switch {
	case kc.storm || kc.hang && kc.family == kubeletRetries:
		return 180 // a storm's 16 pods, or each attempt's deadline
	case kc.family == kubeletBesideHang || kc.family == kubeletTeardown:
		return 110 // a hung ADD's deadline; the fault held while Stops fail
	case kc.family == kubeletLateConfig, kc.family == kubeletHostNetwork, kc.family == kubeletReboot:
		return 90
	case kc.family == kubeletAcrossRestart, kc.family == kubeletRetryRestart, kc.killed, kc.holder, kc.hang:
		return 70
	case kc.family == kubeletNoNetwork, kc.family == kubeletRetries:
		return 45
	}
	return 25
}

// requestTimeout is the kubelet's runtime-request-timeout for the case:
// kubeletHangRequestTimeout where a call hangs, else kubelet's default (0).
func (kc kubeletCase) requestTimeout() time.Duration {
	if kc.hang {
		return kubeletHangRequestTimeout
	}
	return 0
}

// hungRun is how long a RunPodSandbox of the case may take before it
// returns: where ADD hangs, kubelet's deadline for it (twice its
// runtime-request-timeout); else nothing beyond the bounds' own.
func (kc kubeletCase) hungRun() time.Duration {
	return 2 * kc.requestTimeout()
}

// kubeletCases are the covered scenarios' cases, by scenario id, filled as
// the spec tree is built (KubeletScenario).
var kubeletCases = map[string]kubeletCase{}

// KubeletScenario labels a spec with its scenario id, as Scenario does,
// and marks it covered by kubelet mode with the fault its kubelet run
// injects.
func KubeletScenario(id string, kc kubeletCase) Labels {
	kubeletCases[id] = kc
	return Label(verdict.ScenarioLabel(id), report.LabelKubeletMode)
}

// kubeletTwins are the covered scenarios that run their plain twin's case
// on a pod of another shape (a user namespace), by scenario id: the twin's
// case is read when the run starts, whichever file registered it first.
var kubeletTwins = map[string]string{}

// KubeletTwin labels a spec with its scenario id and marks it covered by
// kubelet mode with twin's case: the same fault, the pod's shape in its
// manifest.
func KubeletTwin(id, twin string) Labels {
	kubeletTwins[id] = twin
	return Label(verdict.ScenarioLabel(id), report.LabelKubeletMode)
}

// kubeletCaseOf is the kubelet case of the scenario id, its twin's where
// it has one.
func kubeletCaseOf(id string) (kubeletCase, bool) {
	if twin, ok := kubeletTwins[id]; ok {
		id = twin
	}
	kc, ok := kubeletCases[id]
	return kc, ok
}

// Kubelet mode's bounds, each a real pod's.
const (
	// kubeletStartBound: a static pod's sandbox is asked for within
	// seconds of its manifest (kubelet's file source watches the dir).
	kubeletStartBound = time.Minute
	// kubeletQuiet: kubelet retries a failed pod sync every 10–15 s
	// (report.KubeletBackOff and its jitter); a pod with no call for longer
	// than that and no sandbox left is done with.
	kubeletQuiet = report.KubeletBackOff + report.KubeletBackOff/2 + 5*time.Second
	// kubeletSettleBound: what a deleted pod gets to go: twice kubelet's
	// one-minute GC period (its GC removes a deleted pod's dead
	// sandboxes), and a quiet period more. A sandbox still there then,
	// whose Stops fail, is a pod stuck Terminating.
	kubeletSettleBound = 2*time.Minute + kubeletQuiet
	// kubeletFaultedBound: for a pod whose network broke after it started,
	// how long the fault persists after its deletion: two failed Stops
	// are enough to call it stuck while faulted, and a Stop that went
	// through to call it removed; either ends the wait, so the bound is
	// reached only where kubelet's Stops are slow (a loaded node), and is
	// twice what an idle node needs (2 failed Stops within 30 s).
	kubeletFaultedBound = 2 * time.Minute
	kubeletFaultedStops = 2
	// kubeletClearedStartBound: how long every pod gets to start once the
	// fault cleared (late-cni-config, the storms): kubelet's next retries
	// after its doubled backoff (10 s, then 20 s, with jitter) and a
	// loaded node's start of 16 pods. Idle, the last of 16 started 22 s
	// after the clear; the wait ends as soon as every pod is ready, so only
	// a pod that never starts waits it out.
	kubeletClearedStartBound = kubeletSettleBound
	// kubeletRetryAttempts and kubeletRetryBound: a retried pod is deleted
	// after this many RunPodSandbox calls, or once the bound has passed
	// without them (a runtime where kubelet makes no new sandbox until a
	// Stop succeeds).
	kubeletRetryAttempts = 3
	kubeletRetryBound    = time.Duration(kubeletRetryAttempts)*report.KubeletBackOff*3/2 + 30*time.Second
	// kubeletHangRequestTimeout is the kubelet's runtime-request-timeout
	// where a call hangs (kubeletCase.hang): every CRI call's deadline,
	// RunPodSandbox's twice it (k8s.io/cri-client remote_runtime.go).
	// Kubelet's default, 2 minutes, would hold each hung RunPodSandbox 4
	// minutes and a sustained run's three about 13; a hung call ends the
	// same way at either, and the healthy calls of these runs (a pod's
	// start, a teardown's Stop once the fault cleared) take seconds.
	kubeletHangRequestTimeout = 20 * time.Second
	// kubeletRunTimeout bounds the whole kubelet run: the network, the
	// kubelet's start and teardown, the longest drive (a retried pod's
	// hung attempts each wait out their deadline), the settle, and the
	// restore after it.
	kubeletRunTimeout = 2*time.Minute + kubeletStartBound + kubeletRetryBound + kubeletRetryAttempts*2*kubeletHangRequestTimeout +
		kubeletFaultedBound + kubeletClearedStartBound + kubeletSettleBound
	// kubeletNoCallWindow: how long a pod that kubelet does not start
	// (no usable network) is watched for a RunPodSandbox: two of kubelet's
	// pod worker retries (10–15 s each) and more.
	kubeletNoCallWindow = 2*(report.KubeletBackOff+report.KubeletBackOff/2) + 5*time.Second
)

// kubeletEntry is the report entry of a kubelet run (report.KubeletRun).
const kubeletEntry = "cnifault kubelet run"

// registerKubeletRun registers sc's kubelet run, in kubelet mode, as the
// spec's last cleanup: after the plain run's reclaim, record and restore,
// on an instance clean again.
func registerKubeletRun(sc *scenario) {
	if !tc.Kubelet {
		return
	}
	kc, ok := kubeletCaseOf(sc.ID)
	if !ok {
		return
	}
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
		// A scenario that left its runtime unable to start
		// (nri-rejects-run-then-restart on containerd 2.0-2.2.5) has it
		// replaced at its end; its kubelet run needs one running now.
		replaceDeadRuntime(ctx)
		By("running the scenario's fault under a real kubelet")
		run := sc.underKubelet(ctx, kc)
		AddReportEntry(kubeletEntry, run, ReportEntryVisibilityNever)
	}, NodeTimeout(kubeletRunTimeout))
}

// sweepKilledKubelets sweeps the kubelets of killed runs before this
// run's first starts: each stays in the node ledger, which puts the node's
// values back only once every kubelet in it is gone.
func sweepKilledKubelets(ctx context.Context) {
	GinkgoHelper()
	if !tc.Kubelet {
		return
	}
	_, err := kubelet.SweepStale(ctx, absPath(cli.KubeletRoot(tc.WorkDir)), GinkgoWriter)
	Expect(err).NotTo(HaveOccurred(), "sweeping the kubelets of killed runs")
}

// kubeletSeq numbers the kubelet runs of the process: the names of each
// kubelet instance carry it.
var kubeletSeq int

// underKubelet is one kubelet run of sc's fault. Whatever goes wrong goes
// into the run's Error, never into the spec: the plain verdict was decided.
func (sc *scenario) underKubelet(ctx SpecContext, kc kubeletCase) *report.KubeletRun {
	run := &report.KubeletRun{Kubelet: kubelet.PinnedVersion, RequestTimeoutSeconds: kc.requestTimeout().Seconds()}
	start := time.Now()
	defer func() { run.Seconds = time.Since(start).Round(time.Millisecond).Seconds() }()

	// A scenario of its own (its number, network, journal and pod), so
	// that nothing of the plain run's is read as the kubelet's.
	scenarioSeq++
	k := &scenario{scn.New(rt, scope(),
		scn.ScenarioNames{RunID: runID, Process: process(), Seq: scenarioSeq, ID: sc.ID, SubnetOctet: subnetOctet},
		sc.Description)}
	run.Pod = k.PodUID()
	// The plain run's pod shape: a hostPort pod's chain holds portmap
	// writing through the same backend, and its manifest the hostPort;
	// a user-namespaced pod's manifest says hostUsers: false, and kubelet
	// picks its ids (k.Shape's mapping only marks the shape).
	if p := sc.Portmap(); p != nil {
		k.UsePortmap(p.Backend)
	}
	if kc.family == kubeletHostNetwork {
		k.Shape = k.Shape.With(scn.HostNetworkShape())
	}
	// shapeOf is the shape of the kubelet's pod i: the scenario's, but for
	// the host-network pod beside a hung ADD.
	shapeOf := func(i int) scn.Shape {
		if kc.hostNetwork && i == hostNetworkPod {
			return k.Shape.With(scn.HostNetworkShape())
		}
		return k.Shape
	}
	if sc.Shape.UserNS != nil {
		k.Shape = k.Shape.With(scn.UserNSShape(k.Names))
	}
	run.Shape = kubeletShape(k.Shape)
	switch {
	case kc.storm:
		k.Pods, run.Pods = tc.StormPods, tc.StormPods
	case kc.family == kubeletReboot:
		k.Pods, run.Pods = rebootPods, rebootPods
	case kc.family == kubeletBesideHang:
		k.Pods = hostNetworkPod + 1
	case kc.holder:
		k.Pods = 2
	}
	defer k.restore(ctx)
	if err := k.Prepare(); err != nil {
		run.Error = "preparing the kubelet pod's network: " + err.Error()
		return run
	}
	if err := k.installQuietly(ctx, kc); err != nil {
		run.Error = err.Error()
		return run
	}
	if err := k.TakeBaseline(ctx); err != nil {
		run.Error = "taking the baseline inventory: " + err.Error()
		return run
	}

	kubeletSeq++
	name := fmt.Sprintf("k%s-%d-%d", runID, process(), kubeletSeq)
	root := absPath(cli.KubeletRoot(tc.WorkDir))
	if err := os.MkdirAll(root, 0o755); err != nil {
		run.Error = err.Error()
		return run
	}
	// Removed when this was its last kubelet: the work dir holds no
	// empty dir of a run's.
	defer os.Remove(root)
	proxy, err := criproxy.Start(filepath.Join(tc.StateRoot, name+".sock"), rt.Endpoint())
	if err != nil {
		run.Error = "starting the CRI proxy: " + err.Error()
		return run
	}
	defer proxy.Close()
	// The one family whose verdict rests on kubelet's containers: on a
	// node where no hugetlb limit can be set, CRI-O fails each
	// (host.HugetlbUnmounted), so kubelet is shown no hugepage sizes.
	run.HugepagesHidden = kc.family == kubeletAcrossRestart && host.HugetlbUnmounted()
	kl, err := kubelet.Start(ctx, kubelet.Options{
		Binary:         tc.KubeletBinaryPath(),
		Endpoint:       proxy.Endpoint(),
		Name:           name,
		NodeName:       name,
		WorkDir:        filepath.Join(root, name),
		CgroupRoot:     rt.CgroupParent(),
		RequestTimeout: kc.requestTimeout(),
		HideHugepages:  run.HugepagesHidden,
		Log:            GinkgoWriter,
	})
	if err != nil {
		run.Error = "starting kubelet: " + err.Error()
		return run
	}
	defer func() {
		if err := kl.Teardown(context.WithoutCancel(ctx)); err != nil {
			GinkgoWriter.Printf("tearing kubelet %s down: %v\n", name, err)
		}
	}()

	var pods []kubelet.Pod
	for i, uid := range k.PodUIDs() {
		name := sc.ID
		if i > 0 {
			name = fmt.Sprintf("%s-%d", sc.ID, i)
		}
		pods = append(pods, shapedPod(kubelet.Pod{Name: name, Namespace: scn.PodNamespace(runID), UID: uid,
			Labels: map[string]string{runtimes.RunIDLabel: runID, "cnifault.io/scenario": sc.ID}}, shapeOf(i)))
	}
	k.RunStarted = time.Now()
	added := map[string]bool{}
	addPod := func(p kubelet.Pod) error {
		if err := kl.AddStaticPod(p); err != nil {
			return fmt.Errorf("writing the static pod's manifest: %w", err)
		}
		added[p.Name] = true
		return nil
	}
	for i, pod := range pods {
		if kc.family == kubeletBesideHang && i == hostNetworkPod || kc.holder && i == 0 {
			continue // the drive adds it once the other pod is as it needs
		}
		if err := addPod(pod); err != nil {
			run.Error = err.Error()
			return run
		}
	}
	calls := func() []criproxy.Call { return proxy.CallsFor(k.PodUIDs()...) }
	deleted := false
	deletePod := func() error {
		run.DeletedAfterSeconds = time.Since(k.RunStarted).Round(time.Millisecond).Seconds()
		deleted = true
		var errs []error
		for _, pod := range pods {
			if added[pod.Name] {
				errs = append(errs, kl.RemoveStaticPod(pod.Name))
			}
		}
		return errors.Join(errs...)
	}

	switch kc.family {
	case kubeletTeardown:
		err = k.driveTeardown(ctx, kc, run, calls, deletePod)
	case kubeletNoNetwork:
		err = k.driveNoNetwork(ctx, calls, deletePod)
	case kubeletLateConfig:
		err = k.driveLateConfig(ctx, kc, run, calls, deletePod)
	case kubeletReboot:
		err = k.driveReboot(ctx, kl, run, calls, deletePod)
	case kubeletAcrossRestart:
		err = k.driveAcrossRestart(ctx, run, calls, deletePod)
	case kubeletRetryRestart:
		err = k.driveRetryRestart(ctx, run, calls, deletePod)
	case kubeletBesideHang:
		err = k.driveBesideHang(ctx, kc, run, calls, func() error { return addPod(pods[hostNetworkPod]) }, deletePod)
	case kubeletHostNetwork:
		err = k.driveHostNetwork(ctx, run, calls, deletePod)
	case kubeletFirstAttempt:
		if kc.holder {
			if err = k.startHolder(ctx, calls, func() error { return addPod(pods[0]) }); err != nil {
				break
			}
		}
		if kc.storm {
			err = k.driveStorm(ctx, kc, run, calls, deletePod)
			break
		}
		err = k.driveFailedStart(ctx, kc, run, calls, deletePod)
	default:
		err = k.driveFailedStart(ctx, kc, run, calls, deletePod)
	}
	if errors.Is(err, errRuntimeDown) {
		fillCalls(run, calls())
		return run
	}
	if err == nil {
		err = askedShape(run, func(uid string) scn.Shape { return shapeOf(slices.Index(k.PodUIDs(), uid)) }, calls())
	}
	if err != nil {
		run.Error = err.Error()
		if !deleted {
			_ = deletePod()
		}
		fillCalls(run, calls())
		return run
	}
	k.settleUnderKubelet(ctx, run, calls)
	fillCalls(run, calls())
	return run
}

// shapedPod is p with the shape s in its manifest, as a user writes it:
// each hostPort a container port (kubelet sends it to the runtime as the
// sandbox's port mapping), hostNetwork, and hostUsers: false for a user
// namespace (kubelet picks the ids itself).
func shapedPod(p kubelet.Pod, s scn.Shape) kubelet.Pod {
	for _, m := range s.HostPorts {
		p.Ports = append(p.Ports, corev1.ContainerPort{ContainerPort: m.GetContainerPort(), HostPort: m.GetHostPort(),
			HostIP: m.GetHostIp(), Protocol: corev1.Protocol(m.GetProtocol().String())})
	}
	p.HostNetwork = s.HostNetwork
	p.NoHostUsers = s.UserNS != nil
	return p
}

// kubeletShape names the kubelet pod's shape as its manifest asks for it,
// "" for a plain pod: as the plain run names it (criproxy.ShapeOf), but
// for a user namespace, whose ids kubelet picks.
func kubeletShape(s scn.Shape) string {
	userns := s.UserNS != nil
	s.UserNS = nil
	var parts []string
	if n := s.String(); n != "plain" {
		parts = append(parts, n)
	}
	if userns {
		parts = append(parts, "userns (hostUsers: false)")
	}
	return strings.Join(parts, ", ")
}

// askedShape records in run the shape kubelet asked of the pod (its
// RunPodSandbox calls, as the proxy decoded them) and says where a call
// asked for another than the manifest's: a kubelet that dropped the
// hostPort, the host's network or the user namespace would run another
// scenario than the plain run's, and its run is not judged.
func askedShape(run *report.KubeletRun, shapeOf func(uid string) scn.Shape, calls []criproxy.Call) error {
	shaped := false
	for _, c := range calls {
		if c.Method != "RunPodSandbox" {
			continue
		}
		want := shapeOf(c.Pod.UID)
		manifest, userns := kubeletShape(want), want.UserNS != nil
		want.UserNS = nil
		fixed := want.String()
		if fixed == "plain" {
			fixed = ""
		}
		if c.Shape != "" && !shaped {
			// The run's shape is its shaped pod's (the host-network pod
			// beside a plain one's too): the first one kubelet asked for.
			run.Shape, shaped = c.Shape, true
		}
		var parts []string
		asked := false
		for _, p := range strings.Split(c.Shape, ", ") {
			if strings.HasPrefix(p, "userns ") {
				asked = true
			} else if p != "" {
				parts = append(parts, p)
			}
		}
		if strings.Join(parts, ", ") != fixed || asked != userns {
			return fmt.Errorf("kubelet's RunPodSandbox for the pod (attempt %d) asked for %q, not the manifest's %q",
				c.Pod.Attempt, c.Shape, manifest)
		}
	}
	return nil
}
