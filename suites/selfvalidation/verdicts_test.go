package selfvalidation_test

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/report"
)

// verdict matches a report scenario's verdict and shows the scenario whole
// on mismatch.
func haveVerdict(r run, id, want string) {
	GinkgoHelper()
	s := r.Report.Scenario(id)
	Expect(s).NotTo(BeNil(), "scenario %s missing from the report", id)
	Expect(s.Verdict).To(Equal(want), "scenario %s: %+v\nsuite output:\n%s", id, *s, r.Output)
}

func leakKinds(s *report.Scenario) []string { return kindsOf(s.Leaks) }

func kindsOf(leaks []report.Leak) []string {
	var kinds []string
	for _, l := range leaks {
		kinds = append(kinds, l.Kind)
	}
	return kinds
}

var _ = Describe("cnifault", Ordered, func() {
	var residue *nodeState

	BeforeAll(func() {
		residue = takeNodeState()
	})

	// Debian's 1.6.20 predates the upstream fix (1.6.37, 2.0): with no CNI
	// config RunPodSandbox fails with "cni plugin not initialized" and its
	// deferred cleanup aborts on the failing CNI teardown, leaving the
	// NotReady sandbox and its netns (containerd
	// internal/cri/server/sandbox_run.go RunPodSandbox, pre-fix).
	Context("on containerd-1.6", Label("containerd-1.6"), Ordered, func() {
		var r run
		BeforeAll(func(ctx SpecContext) {
			r = runSuite(ctx, "containerd-1.6")
		}, NodeTimeout(suiteRunTimeout))

		It("reports the runtime it ran on", func() {
			Expect(r.Report.Runtime.Name).To(Equal("containerd"))
			Expect(r.Report.Runtime.Version).To(HavePrefix("1.6.20"))
			Expect(r.Report.Runtime.Endpoint).To(HavePrefix("unix://"))
		})
		It("fails no-cni-config with the sandbox and the netns it leaked", func() {
			haveVerdict(r, "no-cni-config", report.Fail)
			s := r.Report.Scenario("no-cni-config")
			Expect(s.Error).To(ContainSubstring("cni plugin not initialized"))
			Expect(leakKinds(s)).To(ContainElements("sandbox", "netns"))
			for _, l := range s.Leaks {
				Expect(l.ID).NotTo(BeEmpty())
			}
			Expect(s.Artifacts).NotTo(BeEmpty(), "a failed scenario must come with diagnostics")
		})
		// containerd issue 8774: while CNI stays broken, 1.6.20's
		// StopPodSandbox fails on the CNI teardown, so kubelet cannot remove
		// the sandbox either (internal/cri/server/sandbox_stop.go
		// stopPodSandbox returns the teardownPodNetwork error).
		It("reports no-cni-config's leaks as stuck, with the runtime's error", func() {
			s := r.Report.Scenario("no-cni-config")
			Expect(s.Reclaim).To(Equal(report.ReclaimStuck))
			Expect(kindsOf(s.ReclaimLeaks)).To(ContainElements("sandbox", "netns"))
			Expect(s.ReclaimError).To(ContainSubstring("cni plugin not initialized"))
			Expect(filepath.Join(reportDirOf("containerd-1.6"), s.Artifacts, "runtime.log")).To(BeAnExistingFile())
			Expect(filepath.Join(reportDirOf("containerd-1.6"), s.Artifacts, "inventory-after.json")).To(BeAnExistingFile())
		})
		It("passes healthy-network", func() { haveVerdict(r, "healthy-network", report.Pass) })
		It("exits 1 because a scenario failed", func() { Expect(r.ExitCode).To(Equal(report.ExitFail)) })
	})

	// 2.4.2 carries the fix: the teardown error is ignored when setup never
	// produced a CNI result, so the sandbox and netns are removed.
	Context("on containerd-2.4", Label("containerd-2.4"), Ordered, func() {
		var r run
		BeforeAll(func(ctx SpecContext) {
			r = runSuite(ctx, "containerd-2.4")
		}, NodeTimeout(suiteRunTimeout))

		It("reports the runtime it ran on", func() {
			Expect(r.Report.Runtime.Version).To(HavePrefix("2.4.2"))
		})
		It("passes no-cni-config", func() {
			haveVerdict(r, "no-cni-config", report.Pass)
			Expect(r.Report.Scenario("no-cni-config").Error).To(ContainSubstring("cni plugin not initialized"))
			Expect(r.Report.Scenario("no-cni-config").Reclaim).To(Equal(report.ReclaimNotNeeded))
		})
		It("passes healthy-network", func() { haveVerdict(r, "healthy-network", report.Pass) })
		It("exits 0", func() { Expect(r.ExitCode).To(Equal(report.ExitPass)) })
	})

	It("leaves no process, mount, link or file on the node", func() {
		Expect(takeNodeState()).To(matchNodeState(residue))
	})
})
