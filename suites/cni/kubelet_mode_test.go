package cni_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/cri"
	"github.com/cnifault/cnifault/fixtures/criproxy"
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
)

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
	// are enough to call it stuck while faulted.
	kubeletFaultedBound = time.Minute
	kubeletFaultedStops = 2
	// kubeletRetryAttempts and kubeletRetryBound: a retried pod is deleted
	// after this many RunPodSandbox calls, or once the bound has passed
	// without them (a runtime where kubelet makes no new sandbox until a
	// Stop succeeds).
	kubeletRetryAttempts = 3
	kubeletRetryBound    = time.Duration(kubeletRetryAttempts)*report.KubeletBackOff*3/2 + 30*time.Second
	// kubeletRunTimeout bounds the whole kubelet run: the network, the
	// kubelet's start and teardown, the longest drive, the settle, and the
	// restore after it.
	kubeletRunTimeout = 2*time.Minute + kubeletStartBound + kubeletRetryBound + kubeletFaultedBound + kubeletSettleBound
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
	kc, ok := kubeletCases[sc.ID]
	if !ok {
		return
	}
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
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
	run := &report.KubeletRun{Kubelet: kubelet.PinnedVersion}
	start := time.Now()
	defer func() { run.Seconds = time.Since(start).Round(time.Millisecond).Seconds() }()

	// A scenario of its own (its number, network, journal and pod), so
	// that nothing of the plain run's is read as the kubelet's.
	scenarioSeq++
	k := &scenario{scn.New(rt, scope(),
		scn.ScenarioNames{RunID: runID, Process: process(), Seq: scenarioSeq, ID: sc.ID, SubnetOctet: subnetOctet},
		sc.Description)}
	run.Pod = k.PodUID()
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
	kl, err := kubelet.Start(ctx, kubelet.Options{
		Binary:     tc.KubeletBinaryPath(),
		Endpoint:   proxy.Endpoint(),
		Name:       name,
		NodeName:   name,
		WorkDir:    filepath.Join(root, name),
		CgroupRoot: rt.CgroupParent(),
		Log:        GinkgoWriter,
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

	pod := kubelet.Pod{Name: sc.ID, Namespace: scn.PodNamespace(runID), UID: k.PodUID(),
		Labels: map[string]string{runtimes.RunIDLabel: runID, "cnifault.io/scenario": sc.ID}}
	k.RunStarted = time.Now()
	if err := kl.AddStaticPod(pod); err != nil {
		run.Error = "writing the static pod's manifest: " + err.Error()
		return run
	}
	calls := func() []criproxy.Call { return proxy.CallsFor(pod.UID) }
	deleted := false
	deletePod := func() error {
		run.DeletedAfterSeconds = time.Since(k.RunStarted).Round(time.Millisecond).Seconds()
		deleted = true
		return kl.RemoveStaticPod(pod.Name)
	}

	switch kc.family {
	case kubeletTeardown:
		err = k.driveTeardown(ctx, kc, run, calls, deletePod)
	case kubeletNoNetwork:
		err = k.driveNoNetwork(ctx, calls, deletePod)
	default:
		err = k.driveFailedStart(ctx, kc, calls, deletePod)
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

// installQuietly installs the kubelet pod's network with cni-fault
// journaling and, but for a teardown (whose fault comes after the pod
// started), the case's faults in its faults file.
func (k *scenario) installQuietly(ctx SpecContext, kc kubeletCase) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("installing the kubelet pod's network: %v", r)
		}
	}()
	if kc.family == kubeletNoNetwork {
		return k.emptyConfDirQuietly(ctx)
	}
	if kc.family != kubeletTeardown {
		f := kc.faults(k)
		if err := k.SetFaults(f.Faults); err != nil {
			return err
		}
		k.ExpectJournal(f, kc.verb)
	}
	l := cniconf.NewList(k.Network.Name, k.Network.BridgePlugin(), k.Fault())
	if kc.first {
		l = cniconf.NewList(k.Network.Name, k.Fault(), k.Network.BridgePlugin())
	}
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
	if err := awaitNetwork(ctx, holds(l.Name)); err != nil {
		return fmt.Errorf("the runtime did not load the kubelet pod's network %q: %w", l.Name, err)
	}
	return nil
}

// emptyConfDirQuietly empties the conf dir and waits until the runtime has
// no usable network (NetworkReady=false, or no network held), as the plain
// run's InstallNoNetwork does, without asserting.
func (k *scenario) emptyConfDirQuietly(ctx SpecContext) error {
	k.UseRaw(nil)
	if err := cniconf.ConfDir(rt.CNIConfDir()).Clear(); err != nil {
		return err
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

// driveFailedStart waits for the fault to fire in kubelet's first
// RunPodSandbox, lets kubelet retry where the case retries, and deletes
// the pod.
func (k *scenario) driveFailedStart(ctx SpecContext, kc kubeletCase, calls func() []criproxy.Call, deletePod func() error) error {
	if !k.seeFiredWithin(ctx, kubeletStartBound) {
		return fmt.Errorf("the fault never fired for the kubelet's pod within %s (%s; kubelet's calls: %s)",
			kubeletStartBound, k.Expectations(), criproxy.Summary(calls()))
	}
	if kc.family == kubeletRetries {
		poll(ctx, kubeletRetryBound, func() bool {
			return criproxy.Counts(calls())["RunPodSandbox"].Calls >= kubeletRetryAttempts
		})
	}
	return deletePod()
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
	f := kc.faults(k)
	if err := k.SetFaults(f.Faults); err != nil {
		return err
	}
	k.ExpectJournal(f, kc.verb)
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
	poll(ctx, kubeletFaultedBound, func() bool {
		failed, _ := stops()
		return gone() || failed >= kubeletFaultedStops
	})
	if !k.seeFiredWithin(ctx, 0) {
		return fmt.Errorf("the fault never fired for the kubelet's pod: %s (kubelet's calls: %s)", k.Expectations(), criproxy.Summary(calls()))
	}
	run.WhileFaulted = report.KubeletRemoved
	if !gone() {
		run.WhileFaulted = report.KubeletStuckTerminating
	}
	return k.SetFaults(nil)
}

// settleUnderKubelet waits until the deleted pod is done with (no sandbox
// of it listed, and no call of kubelet's for it for kubeletQuiet), or
// kubeletSettleBound has passed, and judges the outcome and what was left.
func (k *scenario) settleUnderKubelet(ctx SpecContext, run *report.KubeletRun, calls func() []criproxy.Call) {
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
	run.RetrySeconds = retrySeconds(cs)
	lastStop, stops := lastOf(cs, "StopPodSandbox")
	switch {
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
	if run.WhileFaulted == "" {
		return
	}
	run.Why = fmt.Sprintf("while faulted: %s; once cleared: %s", run.WhileFaulted, run.Why)
}

// seeFiredWithin polls for the fault's firing for up to d.
func (k *scenario) seeFiredWithin(ctx SpecContext, d time.Duration) bool {
	if k.SeeFired(ctx) {
		return true
	}
	return d > 0 && poll(ctx, d, func() bool { return k.SeeFired(ctx) })
}

// readySandbox is the id of the kubelet pod's ready sandbox, "" while
// there is none.
func (k *scenario) readySandbox(ctx context.Context) string {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return ""
	}
	for _, b := range boxes {
		if b.GetMetadata().GetUid() == k.PodUID() && b.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return b.GetId()
		}
	}
	return ""
}

// listsSandbox tells whether the runtime lists any sandbox of the kubelet
// pod; a failed listing counts as one (not gone).
func (k *scenario) listsSandbox(ctx context.Context) bool {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return true
	}
	for _, b := range boxes {
		if b.GetMetadata().GetUid() == k.PodUID() {
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
