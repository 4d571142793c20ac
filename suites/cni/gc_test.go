package cni_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// CRI-O sends CNI GC once per start, before its NetworkReady turns true:
// server.go restore asks for it before CRI is served, and where the plugin
// is not ready yet cnimgr.go defers it to the first STATUS poll that passes,
// which runs it under the manager's lock before it clears lastError, the
// lock CRI Status's NetworkReady (ReadyOrError) waits for. So once a CRI
// Status after the restart says NetworkReady, the GC has run and cni-fault
// has journaled it (the event); the journal is then read over gcPolls, for
// a runtime that garbage-collects on a timer of its own shortly after.
var gcPolls = scn.Rounds{Span: 2 * time.Second, Interval: pollInterval, Min: scn.MinRounds}

// CNI 1.1's GC gives plugins the attachments that are still valid, so that
// what leaked can be freed. CRI-O sends it once per start; containerd does
// not (go-cni has no GC). The harness restarts a managed runtime, as a node
// reboot or an upgrade would, and reads cni-fault's journal: a runtime that
// sends no GC is reported as such (skipped), a finding rather than an error.
var _ = Describe("CNI GC", func() {
	var (
		sc  *scenario
		ctl runtimes.Controllable
	)
	list11 := func(f cniconf.Fault) cniconf.NetworkList {
		return cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), f).AtVersion(cniconf.CNIVersion110)
	}
	controlled := func() {
		var ok bool
		if ctl, ok = rt.(runtimes.Controllable); !ok {
			skipLacking(report.NeedManaged, externalEndpoint)
		}
	}

	When("live pods meet the runtime's GC", Scenario("gc-spares-live-pods"), Label("gc", "managed-only", report.NeedsLabel(report.NeedCNIGC)), func() {
		BeforeEach(func(ctx SpecContext) {
			controlled()
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (every verb passes)")
			sc.InstallNetwork(ctx, list11(sc.Fault()))
		}, NodeTimeout(scenarioSetupTimeout))

		It("names every live attachment as valid, and frees nothing of them", func(ctx SpecContext) {
			By("starting a pod")
			id, err := sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
			skipWithoutCNI11(err)
			Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")
			live, err := inspect.Take(ctx, sc.Target())
			Expect(err).NotTo(HaveOccurred())

			By("restarting the runtime (killed and started again, as in an upgrade), where it garbage-collects")
			restarted := time.Now()
			Expect(ctl.Crash(ctx)).To(Succeed())
			Expect(ctl.Restart(ctx)).To(Succeed())
			gcs := sc.expectGC(ctx, restarted)

			By("checking every GC's valid attachments against the live pod")
			want := cniconf.Attachment{ContainerID: id, IfName: "eth0"}
			for _, g := range gcs {
				contract.Expect(g.ValidAttachments).To(ContainElement(want),
					"a GC at %s omitted the live attachment %s/%s (it would free its address): valid attachments %v",
					g.Time.Format("15:04:05.000"), id, want.IfName, g.ValidAttachments)
			}

			By("inventorying the live pod's resources")
			after, err := inspect.Take(ctx, sc.Target())
			Expect(err).NotTo(HaveOccurred())
			// Only what the pod added counts: what an earlier scenario's
			// abandoned calls still hold (CRI-O keeps a call held behind a
			// hung ADD until its own timeout) may go with the restart, and
			// so may another process's pod on its way out, met by the live
			// inventory (a bench's crio-1.36 in 3 processes: two unclaimed
			// veths, "peer's netns mounted nowhere", read as freed by GC).
			pod := inspect.Snapshot{Resources: slices.DeleteFunc(inspect.Diff(sc.Baseline, live), inspect.Unclaimed)}
			contract.Expect(inspect.Diff(after, pod)).To(BeEmpty(), "GC freed resources of the live pod %s", id)
		}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout))
	})

	When("a chained DEL's leak meets the runtime's GC once the fault cleared", Scenario("gc-reclaims-leak"), Label("fault:gc", "managed-only", report.NeedsLabel(report.NeedCNIGC)), func() {
		BeforeEach(func(ctx SpecContext) {
			controlled()
			sc = newScenario(ctx)
			By("installing a CNI 1.1.0 list of bridge and cni-fault (ADD: error, DEL: error)")
			f := sc.Fault().On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error"))
			sc.InstallNetwork(ctx, list11(f))
			sc.ExpectJournal(f, cniconf.VerbAdd)
		}, NodeTimeout(scenarioSetupTimeout))

		It("frees the leaked reservation at its GC", func(ctx SpecContext) {
			By("running a pod sandbox whose ADD and DEL fail")
			_, err := sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
			skipWithoutCNI11(err)
			sc.ExpectFaultFired(ctx, faultFiredTimeout)
			Expect(err).To(HaveOccurred(), "RunPodSandbox succeeded despite the fault")
			leaks := sc.Leaks(ctx)
			if len(leaks.Leaks) == 0 {
				Skip("the failed call left nothing for GC to reclaim")
			}

			By("clearing the fault and restarting the runtime, where it garbage-collects")
			sc.writeList(ctx, list11(sc.Fault()))
			restarted := time.Now()
			Expect(ctl.Crash(ctx)).To(Succeed())
			Expect(ctl.Restart(ctx)).To(Succeed())
			sc.expectGC(ctx, restarted)

			By("inventorying the instance after GC")
			Expect(sc.Inventory(ctx)).To(Succeed())
			sc.GCReclaim = report.GCReclaimed
			if len(sc.Scenario.Leaks) > 0 {
				sc.GCReclaim = report.GCStuck
			}
			contract.Expect(leakReport{Scenario: sc.ID, Leaks: sc.Scenario.Leaks}).To(BeClean(),
				"stuck: the runtime's GC did not free what the failed call leaked")
		}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout))
	})
})

// skipWithoutCNI11 skips a scenario whose CNI 1.1.0 list the runtime
// cannot use at all: libcni before 1.2 (containerd 1.6 and 1.7) refuses the
// 1.1.0 result bridge returns, so no CNI 1.1 verb can reach it either.
func skipWithoutCNI11(err error) {
	if err != nil && strings.Contains(err.Error(), `unsupported CNI result version "1.1.0"`) {
		skipLacking(report.NeedCNIGC, "the runtime cannot use a CNI 1.1.0 list (its libcni refuses 1.1.0 results: "+err.Error()+"): it has no CNI GC")
	}
}

// expectGC waits for the runtime's GC calls after since, and skips the
// scenario when none comes: the runtime does not garbage-collect CNI
// attachments (a finding, with the journal as its proof).
func (sc *scenario) expectGC(ctx SpecContext, since time.Time) []cniconf.JournalEntry {
	GinkgoHelper()
	sc.waitReady(ctx)
	var gcs []cniconf.JournalEntry
	var readErr error
	seen := pollRounds(ctx, gcPolls, gcPolls.Bound(time.Second), func() bool {
		var entries []cniconf.JournalEntry
		entries, readErr = sc.Journal()
		gcs = slices.DeleteFunc(entries, func(e cniconf.JournalEntry) bool {
			return e.Verb != cniconf.VerbGC || e.Time.Before(since)
		})
		return len(gcs) > 0
	})
	if !seen {
		// A finding only where the journal was read.
		Expect(readErr).NotTo(HaveOccurred(), "reading cni-fault's journal")
		skipLacking(report.NeedCNIGC, fmt.Sprintf("the runtime did not invoke CNI GC by the time it reported NetworkReady after a restart, nor in the %s after "+
			"(cni-fault's journal holds no GC call): it does not garbage-collect CNI attachments", gcPolls))
	}
	sc.FaultsFired = append(sc.FaultsFired, fmt.Sprintf("GC with %d valid attachments", len(gcs[0].ValidAttachments)))
	return gcs
}
