package cni_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/cri"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Timeouts of scenario nodes and the calls inside them.
const (
	// scenarioSetupBase bounds a scenario's setup but for the wait for the
	// runtime to take a new config up (scenarioSetupTimeout adds
	// networkWaitBound).
	scenarioSetupBase = 45 * time.Second
	// scenarioTimeout bounds one scenario's It: a few calls that each may
	// take up to criCallTimeout on a loaded node.
	scenarioTimeout = 5 * time.Minute
	// scenarioRestoreBase bounds restore's own steps but for the wait for
	// the runtime to take the healthy config up (scenarioRestoreTimeout
	// adds networkWaitBound, and restoreMargin).
	scenarioRestoreBase = 60 * time.Second
	// restoreMargin is what restore leaves of its node's timeout, to return
	// before it.
	restoreMargin = 5 * time.Second
	// criCallTimeout is the client deadline of a CRI call that models
	// kubelet's: kubelet's own runtime-request-timeout. It is an upper
	// bound, never a wait; report.json's slowest_call shows how long the
	// runtime took.
	criCallTimeout = scn.KubeletRequestTimeout
	pollInterval   = 100 * time.Millisecond
)

// mayBlockDeadline is the client deadline of a RunPodSandbox that a runtime
// may hold rather than fail while its network is not ready (a CRI-O that
// was never ready waits for CNI readiness; containerd, and a CRI-O that was
// ready once, fail at once): kubelet's own, however slowly a loaded node
// lets the runtime fail it, but mayBlockPastHeld once the runtime's log
// says it holds the call (the event). The contract then applies once the
// call has timed out: it failed, and nothing it made may be left. Kubelet
// would give up at its deadline and retry.
var mayBlockDeadline = scn.PastHeld(mayBlockPastHeld)

const mayBlockPastHeld = 5 * time.Second

// confFile is the one file the harness writes into the conf dir.
const confFile = scn.ConfFile

// scenario is one scenario's state on the runtime under test
// (fixtures/scenario), with the Ginkgo nodes and assertions around it.
type scenario struct {
	*scn.Scenario
}

var scenarioSeq int

// newScenario prepares a scenario for the current spec: its id comes from
// the spec's scenario label. It snapshots the instance as the baseline and
// registers the restore and reporting that follow the spec.
func newScenario(ctx SpecContext) *scenario {
	GinkgoHelper()
	skipManagedOnlyOnExternal()
	scenarioSeq++
	id := currentScenarioID()
	Expect(id).NotTo(BeEmpty(), "spec %q has no scenario label", CurrentSpecReport().FullText())
	texts := CurrentSpecReport().ContainerHierarchyTexts
	sc := &scenario{scn.New(rt, scope(),
		scn.ScenarioNames{RunID: runID, Process: process(), Seq: scenarioSeq, ID: id, SubnetOctet: subnetOctet},
		strings.TrimPrefix(texts[len(texts)-1], "when "))}
	sc.Kubelet = kubeletModel(CurrentSpecReport().Labels())
	Expect(sc.Prepare()).To(Succeed())
	// Cleanup runs last-registered first: reclaim (with the fault still in
	// place), then record the result, then restore the instance; in
	// kubelet mode, then the fault under a real kubelet.
	registerKubeletRun(sc)
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
	Expect(sc.TakeBaseline(ctx)).NotTo(HaveOccurred(), "taking the baseline inventory")
}

// runScope keeps inventories to this run's pods (scn.RunScope), made at
// the process's first scenario.
var runScope *inspect.Scope

func scope() *inspect.Scope {
	if runScope == nil {
		runScope = scn.RunScope(runID, rt.Inventory())
	}
	return runScope
}

// InstallNetwork writes the list as the only config and waits until the
// runtime reports NetworkReady with exactly this network loaded.
func (sc *scenario) InstallNetwork(ctx SpecContext, l cniconf.NetworkList) {
	GinkgoHelper()
	sc.writeList(ctx, l)
	Expect(awaitNetwork(ctx, holds(l.Name))).To(Succeed(), "the runtime did not load network %q", l.Name)
}

// InstallNetworkOrRefusal is InstallNetwork for a list that a runtime may
// refuse to load (CRI-O validates a list's plugins when it loads it): it
// also accepts a runtime that names the file as refused, for a reason that
// names because (the fault the list carries), and has no usable network
// (NetworkReady=false, or no network held). Then no ADD can happen, and the
// journal says nothing of DEL. A refusal for another reason is not the
// scenario's fault: the setup fails.
func (sc *scenario) InstallNetworkOrRefusal(ctx SpecContext, l cniconf.NetworkList, because string) {
	GinkgoHelper()
	sc.writeList(ctx, l)
	file := filepath.Join(rt.CNIConfDir(), confFile)
	var refusal string
	Expect(awaitNetwork(ctx, func(st cri.NetworkStatus) error {
		if why, refused := st.Refused[file]; refused && st.Unusable() {
			refusal = why
			return nil
		}
		return holds(l.Name)(st)
	})).To(Succeed(), "the runtime neither loaded nor refused network %q", l.Name)
	if refusal != "" {
		Expect(refusal).To(ContainSubstring(because), "the runtime refused %s for a reason that does not name the fault", file)
		GinkgoWriter.Printf("the runtime refused %s: %s\n", file, refusal)
		sc.ExpectRefusal(refusal)
	}
}

// writeList writes l as the only config and tells the runtime
// (writeListQuietly).
func (sc *scenario) writeList(ctx SpecContext, l cniconf.NetworkList) {
	GinkgoHelper()
	Expect(sc.writeListQuietly(ctx, l)).To(Succeed())
}

// InstallMalformed writes content as the only config and waits until the
// runtime has no usable network (noNetworkQuietly).
func (sc *scenario) InstallMalformed(ctx SpecContext, content []byte) {
	GinkgoHelper()
	Expect(sc.noNetworkQuietly(ctx, content)).To(Succeed(), "the runtime did not drop its CNI config")
	sc.ExpectConfigFault()
}

// InstallNoNetwork empties the conf dir and waits until the runtime has no
// usable network: NetworkReady=false, or (a CRI-O that was ready once,
// which stays ready) no network held. The fault fires for a call that
// meets it (ExpectConfigFault).
func (sc *scenario) InstallNoNetwork(ctx SpecContext) {
	GinkgoHelper()
	sc.emptyConfDir(ctx)
	sc.ExpectConfigFault()
}

// emptyConfDir empties the conf dir and waits until the runtime has no
// usable network (noNetworkQuietly).
func (sc *scenario) emptyConfDir(ctx SpecContext) {
	GinkgoHelper()
	Expect(sc.noNetworkQuietly(ctx, nil)).To(Succeed(), "the runtime did not drop its CNI config")
}

// RunSandboxE runs the scenario's pod and returns the runtime's error. A
// sandbox that did start is stopped and removed after the spec.
func (sc *scenario) RunSandboxE(ctx SpecContext) (string, error) {
	return sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
}

// RunSandboxWithin is RunSandboxE with the client deadline d.
func (sc *scenario) RunSandboxWithin(ctx SpecContext, d scn.Deadline) (string, error) {
	GinkgoHelper()
	sc.takeBaseline(ctx)
	id, err := sc.Run(ctx, d)
	if err != nil {
		return "", err
	}
	removeAfterSpec(id)
	return id, nil
}

// removeAfterSpec stops and removes the sandboxes the scenario did start,
// once the spec is over, all at once: a storm's pods would otherwise go one
// after the other.
func removeAfterSpec(ids ...string) {
	if len(ids) == 0 {
		return
	}
	DeferCleanup(func(ctx SpecContext) {
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				_ = rt.CRI().StopPodSandbox(ctx, id)
				_ = rt.CRI().RemovePodSandbox(ctx, id)
			})
		}
		wg.Wait()
	}, NodeTimeout(2*criCallTimeout))
}

// RunSandbox runs the scenario's pod and asserts that it started.
func (sc *scenario) RunSandbox(ctx SpecContext) string {
	GinkgoHelper()
	id, err := sc.RunSandboxE(ctx)
	Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")
	return id
}

// Leaks inventories the instance and returns what is there now that was
// not there before the scenario began. What may yet go by itself
// (verdict.Settling) gets up to scn.KernelSettle, and at least
// scn.MinRounds more inventories, to go, or scn.ForeignSettle on a runtime
// shared with other pods.
func (sc *scenario) Leaks(ctx SpecContext) leakReport {
	GinkgoHelper()
	Expect(sc.Baselined).To(BeTrue(), "no baseline: Leaks before RunSandbox")
	sc.inventoryUntil(ctx, sc.SettleWindow(), func() bool { return !sc.Settling() })
	// Read after the inventory: a DEL that cleaned up what the inventory
	// found missing has reached the journal by now.
	sc.FinishInspection(sc.journal)
	return leakReport{Scenario: sc.ID, Leaks: sc.Scenario.Leaks}
}

// inventoryBound bounds one inventory: a few CRI listings, each within
// kubelet's deadline, and the node's own tables.
const inventoryBound = criCallTimeout

// inventoryUntil takes inventories until settled holds on one, for up to
// window and at least scn.MinRounds of them after the first (a slow node
// may take the whole window for one), and keeps the last: the verdict is
// judged on the inventory that settled, since a fresh one taken after it
// could meet a foreign pod that has only just begun to start.
func (sc *scenario) inventoryUntil(ctx SpecContext, window time.Duration, settled func() bool) {
	GinkgoHelper()
	err := sc.Inventory(ctx)
	Expect(err).NotTo(HaveOccurred(), "taking the inventory")
	if settled() {
		return
	}
	w := scn.Rounds{Span: window, Interval: pollInterval, Min: scn.MinRounds}
	pollRounds(ctx, w, w.Bound(inventoryBound), func() bool {
		err = sc.Inventory(ctx)
		return err == nil && settled()
	})
	Expect(err).NotTo(HaveOccurred(), "taking the inventory")
}

// restore returns the instance to a clean state for the next scenario
// (scn.Scenario.Restore). It reports problems but never fails the spec: the
// verdict was decided before it ran. So it asserts nothing, and its steps
// share a deadline restoreMargin before its node's timeout; a network that
// did not come back is the next scenario's setup error.
func (sc *scenario) restore(sctx SpecContext) {
	ctx, cancel := context.WithTimeout(sctx, scenarioRestoreTimeout-restoreMargin)
	defer cancel()
	sc.Restore(ctx, waitNetwork, GinkgoWriter.Printf)
}

// waitNetwork waits (awaitNetwork) until the runtime holds network name
// and says its network is ready (CRI Status NetworkReady). Ready matters
// after a restart: CRI-O's CNI manager turns ready only at its first good
// poll (every 500 ms, cnimgr.go pollUntilReady), and until then it holds
// RunPodSandbox in waitForCNIPlugin without heeding the client's deadline.
// A config-fault scenario that followed too soon met a held call instead of
// the ready-once failure it is pinned on, and CRI-O resumed that call under
// the next scenario's network, leaving it a sandbox the client had given up
// on. Its failure is returned, never the spec's. A managed runtime that is
// down (it did not start again after a scenario's restart) holds no network
// however long the harness waits: it stops at once, and the spec's cleanup
// replaces the instance (replaceDeadRuntime).
func waitNetwork(ctx context.Context, name string) error {
	return awaitNetwork(ctx, func(st cri.NetworkStatus) error {
		if ctl, ok := rt.(runtimes.Controllable); ok && !ctl.Running() {
			StopTrying(fmt.Sprintf("%s is down", rt.Name())).Now()
		}
		return holds(name)(st)
	})
}

// waitReady waits (awaitNetwork) until the runtime says its network is
// ready, whichever network it holds: after a restart, CRI-O's NetworkReady
// follows its first STATUS poll that passes.
func (sc *scenario) waitReady(ctx SpecContext) {
	GinkgoHelper()
	Expect(awaitNetwork(ctx, func(st cri.NetworkStatus) error {
		if !st.Ready {
			return fmt.Errorf("NetworkReady is false: %s %s (last load: %s)", st.Reason, st.Message, st.LastLoad)
		}
		return nil
	})).To(Succeed(), "the runtime did not report NetworkReady")
}

// currentScenarioID reads the "scenario:<id>" label of the running spec.
func currentScenarioID() string { return verdict.ScenarioID(CurrentSpecReport().Labels()) }

// Scenario labels a spec with its stable scenario id.
func Scenario(id string) Labels { return Label(verdict.ScenarioLabel(id)) }
