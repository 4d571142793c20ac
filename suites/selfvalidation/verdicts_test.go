package selfvalidation_test

import (
	"os"
	"path/filepath"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/report"
)

// expectation is what the public bug history and the runtime's source at
// its tag predict for one scenario. Leaks lists the leaked kinds exactly.
type expectation struct {
	verdict string
	leaks   []string
	reclaim string
	// why cites the code path that produces the verdict.
	why string
}

// Where the paths below point:
//   - 1.6.20: pkg/cri/server/sandbox_run.go RunPodSandbox. The deferred
//     teardown sets cleanupErr whenever teardownPodNetwork fails; with
//     cleanupErr set, the netns defer skips NetNS.Remove and the sandbox is
//     added to the store as NotReady (upstream fixed this in 1.6.37/2.0).
//     pkg/cri/server/sandbox_stop.go StopPodSandbox returns the same teardown
//     error, so kubelet cannot reclaim while the fault persists (issue 8774).
//   - 2.4.2: internal/cri/server/sandbox_run.go RunPodSandbox. The deferred
//     teardown drops the teardown error when sandbox.CNIResult == nil (setup
//     never produced a result), so the netns is removed and the sandbox
//     deleted even when DEL failed: a chained DEL that fails before reaching
//     bridge strands host-local's address (issue 12130, open).
//   - Both: libcni DelNetworkList runs plugins in reverse and stops at the
//     first error, so bridge/host-local never see DEL when a later plugin's
//     DEL fails or its binary is missing.
var expected = map[string]map[string]expectation{
	"containerd-1.6": {
		"healthy-network": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"no-cni-config": {report.Fail, []string{"netns", "sandbox"}, report.ReclaimStuck,
			"RunPodSandbox: teardownPodNetwork fails with 'cni plugin not initialized', cleanupErr keeps sandbox and netns"},
		"malformed-cni-config": {report.Fail, []string{"netns", "sandbox"}, report.ReclaimStuck,
			"the config fails to load, so CNI is uninitialized exactly as with no config"},
		"missing-plugin-binary": {report.Fail, []string{"ip", "link", "netns", "sandbox"}, report.ReclaimStuck,
			"DEL fails on the missing binary before bridge; cleanupErr keeps the netns, whose veth and address stay"},
		"add-error":          {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-exit-no-output": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-garbage-result": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-crash":          {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"partial-add":        {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"partial-add-del-fails": {report.Fail, []string{"ip", "link", "netns", "sandbox"}, report.ReclaimStuck,
			"the injected DEL error is a teardown error: cleanupErr keeps everything; StopPodSandbox hits it again"},
		"partial-add-del-fails-once": {report.Fail, []string{"ip", "link", "netns", "sandbox"}, report.ReclaimReclaimed,
			"RunPodSandbox keeps everything as above, but StopPodSandbox's teardownPodNetwork retries DEL, which now passes"},
		"ipam-exhausted": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		// setupPodNetwork runs with the request context, so libcni kills the
		// hung plugin at the deadline; the teardown uses a fresh DeferContext
		// and its DEL passes, so cleanupErr stays nil and the name is released.
		"add-hang-deadline": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		// NewContainer runs before the netns is created, so the restarted
		// daemon recovers a NotReady sandbox whose Stop tears the network down.
		"runtime-killed-mid-add": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
	},
	"containerd-2.4": {
		"healthy-network": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"no-cni-config": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded,
			why: "the teardown error is ignored because CNIResult is nil: netns removed, sandbox deleted"},
		"malformed-cni-config": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"missing-plugin-binary": {report.Fail, []string{"ip"}, report.ReclaimStuck,
			"DEL stops at the missing binary; the error is ignored (CNIResult nil) and the sandbox is gone, so nothing can reclaim the address"},
		"add-error":          {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-exit-no-output": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-garbage-result": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-crash":          {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"partial-add":        {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"partial-add-del-fails": {report.Fail, []string{"ip"}, report.ReclaimStuck,
			"containerd issue 12130: the DEL error is ignored and the sandbox removed, stranding host-local's address"},
		"partial-add-del-fails-once": {report.Fail, []string{"ip"}, report.ReclaimStuck,
			"the same path: the sandbox is deleted at once, so no later Stop ever retries DEL"},
		"ipam-exhausted":    {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		"add-hang-deadline": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
		// SandboxStore().Create and the netns path update precede
		// setupPodNetwork, so the restarted daemon recovers the sandbox and
		// StopPodSandbox's DEL releases the address.
		"runtime-killed-mid-add": {verdict: report.Pass, reclaim: report.ReclaimNotNeeded},
	},
}

// observed are the scenarios whose chain holds cni-fault, so the report must
// say whether DEL followed the failed ADD.
var observed = []string{
	"missing-plugin-binary", "add-error", "add-exit-no-output", "add-garbage-result", "add-crash",
	"partial-add", "partial-add-del-fails", "partial-add-del-fails-once", "ipam-exhausted",
	"add-hang-deadline", "runtime-killed-mid-add",
}

// describeRuntime declares the pinned verdicts of one managed runtime.
func describeRuntime(runtime, version string, exit int) {
	Context("on "+runtime, Label(runtime), Ordered, func() {
		var r run
		BeforeAll(func(ctx SpecContext) {
			r = runSuite(ctx, runtime)
		}, NodeTimeout(suiteRunTimeout))

		It("reports the runtime it ran on and the whole catalog", func() {
			Expect(r.Report.Runtime.Name).To(Equal("containerd"))
			Expect(r.Report.Runtime.Version).To(HavePrefix(version))
			Expect(r.Report.Runtime.Endpoint).To(HavePrefix("unix://"))
			var ids []string
			for _, s := range r.Report.Scenarios {
				ids = append(ids, s.ID)
			}
			var want []string
			for id := range expected[runtime] {
				want = append(want, id)
			}
			Expect(ids).To(ConsistOf(want))
		})
		It("finishes the catalog within 90 seconds", func() {
			Expect(r.Report.DurationSeconds).To(BeNumerically("<", 90))
		})
		It("exits with the status its verdicts call for", func() {
			Expect(r.ExitCode).To(Equal(exit), r.Output)
		})

		for id, want := range expected[runtime] {
			It("gives "+id+" the verdict "+want.verdict, func() {
				s := r.Report.Scenario(id)
				Expect(s).NotTo(BeNil(), "scenario %s missing from the report", id)
				Expect(s.Verdict).To(Equal(want.verdict), "%s on %s (%s): %+v\nsuite output:\n%s", id, runtime, want.why, *s, r.Output)
				Expect(report.LeakKinds(s.Leaks)).To(Equal(want.leaks), "%s leaked %+v", id, s.Leaks)
				Expect(s.Reclaim).To(Equal(want.reclaim), "%s reclaim (%s): %+v", id, want.why, *s)
				if want.reclaim == report.ReclaimStuck {
					Expect(s.ReclaimLeaks).NotTo(BeEmpty())
				}
				for _, l := range s.Leaks {
					Expect(l.ID).NotTo(BeEmpty())
				}
				if want.verdict == report.Fail {
					Expect(s.Artifacts).NotTo(BeEmpty(), "a failed scenario must come with diagnostics")
					Expect(filepath.Join(reportDirOf(runtime), s.Artifacts, "runtime.log")).To(BeAnExistingFile())
					Expect(filepath.Join(reportDirOf(runtime), s.Artifacts, "inventory-after.json")).To(BeAnExistingFile())
				}
				// Every runtime here sends DEL after a failed ADD.
				if slices.Contains(observed, id) {
					Expect(s.DelAfterFailedAdd).To(HaveValue(BeTrue()), "%s: del_after_failed_add", id)
				} else {
					Expect(s.DelAfterFailedAdd).To(BeNil())
				}
			})
		}
	})
}

var _ = Describe("cnifault", Ordered, ContinueOnFailure, func() {
	var residue *nodeState

	BeforeAll(func() {
		residue = takeNodeState()
	})

	describeRuntime("containerd-1.6", "1.6.20", report.ExitFail)
	describeRuntime("containerd-2.4", "2.4.2", report.ExitFail)

	It("reports no-cni-config's error and stuck reclaim on 1.6 with the runtime's words", func() {
		r, err := report.Read(filepath.Join(reportDirOf("containerd-1.6"), "report.json"))
		Expect(err).NotTo(HaveOccurred())
		s := r.Scenario("no-cni-config")
		Expect(s.Error).To(ContainSubstring("cni plugin not initialized"))
		Expect(s.ReclaimError).To(ContainSubstring("cni plugin not initialized"))
	})

	It("finds the README's verdict matrix up to date with these reports", func() {
		var reports []*report.Report
		for _, rt := range []string{"containerd-1.6", "containerd-2.4"} {
			r, err := report.Read(filepath.Join(reportDirOf(rt), "report.json"))
			Expect(err).NotTo(HaveOccurred())
			reports = append(reports, r)
		}
		readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(readme)).To(ContainSubstring(report.Matrix(reports)), "run make verdict-table")
	})

	It("leaves no process, mount, link or file on the node", func() {
		Expect(takeNodeState()).To(matchNodeState(residue))
	})
})
