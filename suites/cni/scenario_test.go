package cni_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/framework"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Timeouts of scenario nodes and the calls inside them.
const (
	// scenarioSetupBase bounds a scenario's setup but for what the runtime
	// does to take a new config up (scenarioSetupTimeout adds it).
	scenarioSetupBase = 45 * time.Second
	// scenarioTimeout bounds one scenario's It.
	scenarioTimeout = 2 * time.Minute
	// scenarioRestoreBase bounds restore's own steps but for what the
	// runtime does to take the healthy config up (scenarioRestoreTimeout
	// adds it, and restoreMargin).
	scenarioRestoreBase = 60 * time.Second
	// restoreMargin is what restore leaves of its node's timeout, to return
	// before it.
	restoreMargin = 5 * time.Second
	// networkSettleTimeout is how long a runtime may take to pick up a
	// change in its CNI config dir.
	networkSettleTimeout = 20 * time.Second
	// criCallTimeout is the client deadline of one CRI call, as kubelet's
	// runtime-request-timeout would be.
	criCallTimeout = 30 * time.Second
	// mayBlockCallTimeout is the client deadline of a RunPodSandbox that a
	// runtime may hold rather than fail while its network is not ready
	// (CRI-O waits for CNI readiness; containerd fails at once). The
	// contract then applies once the call has timed out: it failed, and
	// nothing it made may be left. Kubelet would give up at the same point
	// and retry.
	mayBlockCallTimeout = 5 * time.Second
	pollInterval        = 100 * time.Millisecond
	// kernelSettle is how long the kernel may take to destroy a released
	// network namespace and the veths inside it.
	kernelSettle = 2 * time.Second
	// foreignSettle is how long a pod someone else is starting (or failing
	// to start) on a shared runtime may hold a netns or a veth that names
	// no owner before it either caches its network result or is torn down.
	foreignSettle = 15 * time.Second
)

// confFile is the one file the harness writes into the conf dir.
const confFile = "00-cnifault.conflist"

// scenario is one scenario's state on the runtime under test.
type scenario struct {
	ID          string
	Description string
	// Network names this scenario's bridge, subnet and IPAM dir.
	Network cniconf.Network
	names   framework.ScenarioNames
	// conflist is what was installed, for diagnostics.
	conflist  []byte
	logOffset int64
	baseline  inspect.Snapshot
	after     inspect.Snapshot
	// observed: the installed chain holds cni-fault, whose journal shows
	// the runtime's CNI calls.
	observed   bool
	runStarted time.Time
	baselined  bool
	// RunPodSandbox's error and the leaks found, for the report.
	runErr    string
	leaks     []inspect.Resource
	inspected bool
	// The reclaim's outcome.
	reclaimState string
	reclaimLeaks []inspect.Resource
	reclaimErr   string
	afterReclaim inspect.Snapshot
	delAfterAdd  *bool
	// checks are the ways this scenario's fault can be seen to fire;
	// fired is what was seen (ExpectFaultFired).
	checks []faultCheck
	fired  []string
}

var scenarioSeq int

// newScenario prepares a scenario for the current spec: its id comes from
// the spec's scenario label. It snapshots the instance as the baseline and
// registers the restore and reporting that follow the spec.
func newScenario(ctx SpecContext) *scenario {
	GinkgoHelper()
	scenarioSeq++
	id := currentScenarioID()
	Expect(id).NotTo(BeEmpty(), "spec %q has no scenario label", CurrentSpecReport().FullText())
	texts := CurrentSpecReport().ContainerHierarchyTexts
	sc := &scenario{
		ID:          id,
		Description: strings.TrimPrefix(texts[len(texts)-1], "when "),
		names:       framework.ScenarioNames{RunID: runID, Process: GinkgoParallelProcess(), Seq: scenarioSeq, ID: id},
		logOffset:   rt.LogSize(),
	}
	sc.Network = sc.names.Network(rt.WorkDir())
	Expect(os.MkdirAll(sc.Network.IPAMDataDir, 0o755)).To(Succeed())
	rt.OwnLink(sc.Network.Bridge)
	// Cleanup runs last-registered first: reclaim (with the fault still in
	// place), then record the result, then restore the instance.
	DeferCleanup(sc.restore, NodeTimeout(scenarioRestoreTimeout))
	DeferCleanup(sc.record)
	DeferCleanup(sc.reclaim, NodeTimeout(reclaimTimeout))
	return sc
}

// takeBaseline inventories the instance right before the call under test,
// so that what a scenario's setup made on purpose (a reserved address, a
// config) never counts as a leak.
func (sc *scenario) takeBaseline(ctx SpecContext) {
	GinkgoHelper()
	if sc.baselined {
		return
	}
	var err error
	sc.baseline, err = inspect.Take(ctx, sc.target())
	Expect(err).NotTo(HaveOccurred(), "taking the baseline inventory")
	sc.baselined = true
}

// runScope keeps inventories to this run's pods: on a runtime that serves
// other pods too (external mode) theirs are never leaks, nor reclaimed.
// Managed instances use it as well; all their pods are the run's.
var runScope *inspect.Scope

// podNamespace is the namespace of every pod of this run.
func podNamespace() string { return framework.PodNamespace(runID) }

// target is where the instance keeps what a leak check counts.
func (sc *scenario) target() inspect.Target {
	inv := rt.Inventory()
	if runScope == nil {
		runScope = &inspect.Scope{Labels: map[string]string{runtimes.RunIDLabel: runID}, Namespace: podNamespace(),
			Strict: inv.Shared}
	}
	return inspect.Target{
		Scope:        runScope,
		CRI:          rt.CRI(),
		NetNSDirs:    inv.NetNSDirs,
		MountRoots:   inv.MountRoots,
		IPAMDirs:     []string{sc.Network.IPAMDataDir},
		Address:      inv.Address,
		ProcessArgs:  inv.ProcessArgs,
		Bridges:      []string{sc.Network.Bridge},
		CNICacheDirs: inv.CNICacheDirs,
		// containerd attaches loopback as its own network, "cni-loopback".
		Networks: []string{sc.Network.Name, "cni-loopback"},
		// Every instance on the node shares libcni's cache and the
		// "cni-loopback" name: only this run's pods count.
		PodNamespace: podNamespace(),
	}
}

// InstallNetwork writes the list as the only config and waits until the
// runtime reports NetworkReady with exactly this network loaded.
func (sc *scenario) InstallNetwork(ctx SpecContext, l cniconf.NetworkList) {
	GinkgoHelper()
	sc.writeList(ctx, l)
	Eventually(func(g Gomega) {
		st, err := runtimes.Network(ctx, rt)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Ready).To(BeTrue(), "NetworkReady is false: %s %s (last load: %s)", st.Reason, st.Message, st.LastLoad)
		g.Expect(st.HoldsNetwork(l.Name)).To(BeTrue(), "the runtime holds another CNI config: %s %v", st.CNIConfig, st.Networks)
	}).WithContext(ctx).WithTimeout(networkSettleTimeout).WithPolling(pollInterval).Should(Succeed(),
		"the runtime did not load network %q", l.Name)
}

// InstallNetworkOrRefusal is InstallNetwork for a list that a runtime may
// refuse to load (CRI-O validates a list's plugins when it loads it): it
// also accepts a runtime that reports NetworkReady=false and names the file
// as refused. Then no ADD can happen, and the journal says nothing of DEL.
func (sc *scenario) InstallNetworkOrRefusal(ctx SpecContext, l cniconf.NetworkList) {
	GinkgoHelper()
	sc.writeList(ctx, l)
	file := filepath.Join(rt.CNIConfDir(), confFile)
	Eventually(func(g Gomega) {
		st, err := runtimes.Network(ctx, rt)
		g.Expect(err).NotTo(HaveOccurred())
		if why, refused := st.Refused[file]; refused && !st.Ready {
			GinkgoWriter.Printf("the runtime refused %s: %s\n", file, why)
			sc.observed = false
			sc.expectFault("the runtime to refuse the list", func(context.Context) (string, bool) {
				return "the runtime refused the list: " + why, true
			})
			return
		}
		g.Expect(st.Ready).To(BeTrue(), "NetworkReady is false: %s %s (last load: %s)", st.Reason, st.Message, st.LastLoad)
		g.Expect(st.HoldsNetwork(l.Name)).To(BeTrue(), "the runtime holds another CNI config: %s %v", st.CNIConfig, st.Networks)
	}).WithContext(ctx).WithTimeout(networkSettleTimeout).WithPolling(pollInterval).Should(Succeed(),
		"the runtime neither loaded nor refused network %q", l.Name)
}

// writeList writes l as the only config and tells the runtime.
func (sc *scenario) writeList(ctx SpecContext, l cniconf.NetworkList) {
	GinkgoHelper()
	raw, err := l.Bytes()
	Expect(err).NotTo(HaveOccurred())
	sc.conflist = raw
	sc.observed = observesCNI(l)
	for _, p := range l.Plugins {
		if f, ok := p.(cniconf.Fault); ok {
			sc.expectJournal(f, cniconf.VerbAdd)
		}
	}
	dir := cniconf.ConfDir(rt.CNIConfDir())
	Expect(dir.Clear()).To(Succeed())
	Expect(dir.WriteList(confFile, l)).To(Succeed())
	Expect(runtimes.NetworkConfigChanged(ctx, rt)).To(Succeed(), "the runtime did not take up the new config")
}

// InstallMalformed writes content as the only config and waits until the
// runtime reports NetworkReady=false.
func (sc *scenario) InstallMalformed(ctx SpecContext, content []byte) {
	GinkgoHelper()
	sc.conflist = content
	sc.observed = false
	dir := cniconf.ConfDir(rt.CNIConfDir())
	Expect(dir.Clear()).To(Succeed())
	Expect(dir.WriteRaw(confFile, content)).To(Succeed())
	Expect(runtimes.NetworkConfigChanged(ctx, rt)).To(Succeed(), "the runtime did not take up the new config")
	sc.waitNetworkNotReady(ctx)
	sc.expectNetworkNotReady()
}

// InstallNoNetwork empties the conf dir and waits until the runtime reports
// NetworkReady=false.
func (sc *scenario) InstallNoNetwork(ctx SpecContext) {
	GinkgoHelper()
	sc.conflist = nil
	sc.observed = false
	Expect(cniconf.ConfDir(rt.CNIConfDir()).Clear()).To(Succeed())
	Expect(runtimes.NetworkConfigChanged(ctx, rt)).To(Succeed(), "the runtime did not take up the new config")
	sc.waitNetworkNotReady(ctx)
	sc.expectNetworkNotReady()
}

func (sc *scenario) waitNetworkNotReady(ctx SpecContext) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		st, err := runtimes.Network(ctx, rt)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Ready).To(BeFalse(), "the runtime still reports NetworkReady with %s %v", st.CNIConfig, st.Networks)
	}).WithContext(ctx).WithTimeout(networkSettleTimeout).WithPolling(pollInterval).Should(Succeed(),
		"the runtime did not drop its CNI config")
}

// PodConfig is the scenario's pod, traceable to its run and scenario.
func (sc *scenario) PodConfig() *runtimeapi.PodSandboxConfig {
	return sc.names.PodConfig(rt.CgroupParent())
}

// RunSandboxE runs the scenario's pod and returns the runtime's error. A
// sandbox that did start is stopped and removed after the spec.
func (sc *scenario) RunSandboxE(ctx SpecContext) (string, error) {
	return sc.RunSandboxWithin(ctx, criCallTimeout)
}

// RunSandboxWithin is RunSandboxE with the client deadline d.
func (sc *scenario) RunSandboxWithin(ctx SpecContext, d time.Duration) (string, error) {
	GinkgoHelper()
	sc.takeBaseline(ctx)
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if sc.runStarted.IsZero() {
		sc.runStarted = time.Now()
	}
	id, err := rt.CRI().RunPodSandbox(cctx, sc.PodConfig())
	if err != nil {
		if sc.runErr == "" {
			sc.runErr = err.Error()
		}
		// The runtime names the failed sandbox in its error: what it left
		// is this run's.
		sc.target().Scope.MarkOwn(framework.SandboxIDsIn(err.Error())...)
		return "", err
	}
	sc.target().Scope.MarkOwn(id)
	DeferCleanup(func(ctx SpecContext) {
		_ = rt.CRI().StopPodSandbox(ctx, id)
		_ = rt.CRI().RemovePodSandbox(ctx, id)
	}, NodeTimeout(2*criCallTimeout))
	return id, nil
}

// RunSandbox runs the scenario's pod and asserts that it started.
func (sc *scenario) RunSandbox(ctx SpecContext) string {
	GinkgoHelper()
	id, err := sc.RunSandboxE(ctx)
	Expect(err).NotTo(HaveOccurred(), "RunPodSandbox")
	return id
}

// Leaks inventories the instance and returns what is there now that was
// not there before the scenario began. What may yet go by itself
// (verdict.Settling) gets up to kernelSettle to go, or foreignSettle on a
// runtime shared with other pods.
func (sc *scenario) Leaks(ctx SpecContext) leakReport {
	GinkgoHelper()
	Expect(sc.baselined).To(BeTrue(), "no baseline: Leaks before RunSandbox")
	take := func() error {
		var err error
		sc.markOwnFromJournal()
		sc.after, err = inspect.Take(ctx, sc.target())
		sc.leaks = inspect.Diff(sc.baseline, sc.after)
		return err
	}
	Expect(take()).To(Succeed(), "taking the inventory")
	shared := rt.Inventory().Shared
	settle := kernelSettle
	if shared {
		settle = foreignSettle
	}
	settling := func(r inspect.Resource) bool { return verdict.Settling(r, shared) }
	if slices.ContainsFunc(sc.leaks, settling) {
		quiet := NewGomega(func(string, ...int) {})
		quiet.Eventually(func(g Gomega) {
			g.Expect(take()).To(Succeed())
			g.Expect(slices.ContainsFunc(sc.leaks, settling)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
		Expect(take()).To(Succeed(), "taking the inventory")
	}
	// Read after the inventory: a DEL that cleaned up what the inventory
	// found missing has reached the journal by now.
	sc.delAfterAdd = sc.delAfterFailedAdd()
	sc.inspected = true
	return leakReport{Scenario: sc.ID, Leaks: sc.leaks}
}

// markOwnFromJournal tells the scope the container ids cni-fault journaled
// for this scenario's pod: a sandbox that failed with no id in the error
// (a client deadline) is still known as the run's.
func (sc *scenario) markOwnFromJournal() {
	entries, err := cniconf.ReadJournal(filepath.Join(sc.faultDir(), "journal.jsonl"))
	if err != nil {
		return
	}
	uid := sc.PodConfig().GetMetadata().GetUid()
	for _, e := range entries {
		if e.PodUID == uid {
			sc.target().Scope.MarkOwn(e.ContainerID)
		}
	}
}

// restore returns the instance to a clean state for the next scenario, the
// way an operator would: restore a working network so that a sandbox stuck
// on broken CNI can be stopped, remove every sandbox, then clear what the
// runtime could not. It reports problems but never fails the spec: the
// verdict was decided before it ran. So it asserts nothing, and its steps
// share a deadline restoreMargin before its node's timeout; a network that
// did not come back is the next scenario's setup error.
func (sc *scenario) restore(sctx SpecContext) {
	ctx, cancel := context.WithTimeout(sctx, scenarioRestoreTimeout-restoreMargin)
	defer cancel()
	sc.stopHungPlugins()
	healthy := cniconf.BridgeList(sc.Network)
	healthy.Name = sc.Network.Name + "-restore"
	dir := cniconf.ConfDir(rt.CNIConfDir())
	if err := dir.Clear(); err == nil {
		_ = dir.WriteList(confFile, healthy)
	}
	if err := runtimes.NetworkConfigChanged(ctx, rt); err != nil {
		GinkgoWriter.Printf("restore: the runtime did not take up the healthy network: %v\n", err)
	}
	if err := waitNetwork(ctx, healthy.Name); err != nil {
		GinkgoWriter.Printf("restore: the healthy network did not settle: %v\n", err)
	}
	// Only this run's pods: on an external runtime others are not ours.
	pods, err := rt.CRI().ListPodSandboxes(ctx)
	if err == nil {
		for _, p := range pods {
			if !sc.target().Scope.Owns(p) {
				continue
			}
			if err := rt.CRI().StopPodSandbox(ctx, p.GetId()); err != nil {
				GinkgoWriter.Printf("restore: stop %s: %v\n", p.GetId(), err)
			}
			if err := rt.CRI().RemovePodSandbox(ctx, p.GetId()); err != nil {
				GinkgoWriter.Printf("restore: remove %s: %v\n", p.GetId(), err)
			}
		}
	}
	// Network namespaces the runtime could not remove: only those the
	// strict check reported as this run's leaks (on a shared runtime an
	// unowned netns is held back until it settles; it may be a foreign pod's
	// that is still starting), and that no foreign pod has claimed since:
	// the inventory taken now updates what the scope knows.
	if slices.ContainsFunc(sc.leaks, func(r inspect.Resource) bool { return r.Kind == inspect.KindNetNS }) {
		_, _ = inspect.Take(ctx, sc.target())
	}
	for _, r := range sc.leaks {
		if r.Kind != inspect.KindNetNS || runScope.ForeignNetNS(r.ID) {
			continue
		}
		if _, err := os.Lstat(r.ID); err != nil {
			continue
		}
		if _, err := host.UnmountUnder(r.ID); err != nil {
			GinkgoWriter.Printf("restore: unmount %s: %v\n", r.ID, err)
		}
		_ = os.Remove(r.ID)
	}
	_ = os.RemoveAll(sc.Network.IPAMDataDir)
	_ = dir.Clear()
}

// waitNetwork polls, for up to networkSettleTimeout, until the runtime
// holds network name. Its failure is returned, never the spec's: a Gomega
// whose fail handler only keeps the message.
func waitNetwork(ctx context.Context, name string) error {
	var failure error
	quiet := NewGomega(func(message string, _ ...int) { failure = errors.New(message) })
	quiet.Eventually(func(g Gomega) {
		st, err := runtimes.Network(ctx, rt)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.HoldsNetwork(name)).To(BeTrue(), "the runtime holds network %s: %+v", name, st)
	}).WithContext(ctx).WithTimeout(networkSettleTimeout).WithPolling(pollInterval).Should(Succeed())
	return failure
}

// currentScenarioID reads the "scenario:<id>" label of the running spec.
func currentScenarioID() string { return verdict.ScenarioID(CurrentSpecReport().Labels()) }

// Scenario labels a spec with its stable scenario id.
func Scenario(id string) Labels { return Label(verdict.ScenarioLabel(id)) }
