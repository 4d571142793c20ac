package selfvalidation_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/internal/testenv"
)

// withoutInventory are the scenarios whose verdict rests on no inventory,
// and so have no coverage: status-hang judges whether CRI Status answers
// within kubelet's period while a STATUS hangs.
var withoutInventory = []string{"status-hang"}

// itInspectsEveryKind declares, among the matrix's specs, that every
// managed runtime's run read every leak kind in every inventory a verdict
// rests on, iptables from every netfilter tool: the pins are verdicts on
// whole inventories, not on what happened to be readable.
func itInspectsEveryKind() {
	It("inspects every leak kind on every managed runtime, iptables from iptables-save and nft", func() {
		for _, rt := range managedRuntimes {
			r, err := report.Read(filepath.Join(reportDirOf(rt.name), "report.json"))
			Expect(err).NotTo(HaveOccurred())
			for _, s := range r.Scenarios {
				if s.Verdict == report.Skipped || s.Verdict == report.Error {
					continue
				}
				if slices.Contains(withoutInventory, s.ID) {
					Expect(s.Coverage).To(BeNil(), "%s %s took no inventory", rt.name, s.ID)
					continue
				}
				Expect(s.Coverage).NotTo(BeNil(), "%s %s", rt.name, s.ID)
				Expect(s.Coverage.NotInspected).To(BeEmpty(), "%s %s", rt.name, s.ID)
				Expect(s.Coverage.Inspected).To(Equal(inspect.Kinds), "%s %s", rt.name, s.ID)
				Expect(s.Coverage.Sources[inspect.KindIPTables]).To(ContainElements("iptables-save", "nft"), "%s %s", rt.name, s.ID)
			}
		}
	})
}

// hiddenNFT is the reason an inventory gives where nft cannot be found.
const hiddenNFT = "nft not found on PATH nor in /usr/sbin, /sbin"

var _ = Describe("A run that requires coverage", Label("gating"), func() {
	When("the harness cannot find nft, one of the tools iptables is read with", func() {
		It("reports iptables not inspected with why, and exits 1 naming it, where the pass alone would exit 0", func(ctx SpecContext) {
			// nft is hidden by a private mount namespace around the run:
			// the plugins, in the same namespace, use iptables (their
			// default where it works), so the pod's network is as ever and
			// only the harness's reading of the plugins' nftables tables
			// is gone.
			name := "coverage-without-nft"
			reportDir := filepath.Join(repoRoot, "_output", "reports", name)
			Expect(os.RemoveAll(reportDir)).To(Succeed())
			args := append([]string{suiteBinary(), "--runtime", "containerd-2.4", "--report-dir", reportDir},
				runFlags(filepath.Join(repoRoot, "_output", "work-"+name))...)
			argv := testenv.Without(GinkgoT(), []string{"nft"}, append(args, "--require-coverage", "-ginkgo.label-filter=scenario:healthy-network")...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = repoRoot
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = harnessTeardownGrace
			code, out := combinedExit(cmd)
			Expect(code).To(Equal(report.ExitFail), out)
			Expect(out).To(MatchRegexp(`(?m)^PASS +healthy-network +[0-9.]+s +\(not inspected: iptables\)  <-- coverage required: healthy-network inspected less than every kind: iptables not inspected \(%s\)$`, hiddenNFT))

			r, err := report.Read(filepath.Join(reportDir, "report.json"))
			Expect(err).NotTo(HaveOccurred(), out)
			s := r.Scenario("healthy-network")
			Expect(s).NotTo(BeNil())
			Expect(s.Verdict).To(Equal(report.Pass))
			Expect(s.Coverage.NotInspected).To(Equal([]report.Gap{{Kind: inspect.KindIPTables, Reason: hiddenNFT}}))
			Expect(s.Coverage.Sources[inspect.KindIPTables]).To(ContainElement("iptables-save"))
			Expect(s.Coverage.Sources[inspect.KindIPTables]).NotTo(ContainElement("nft"))

			By("gating the same report again, with and without the requirement")
			code, out = gateReport(ctx, filepath.Join(reportDir, "report.json"))
			Expect(code).To(Equal(report.ExitPass), out)
			Expect(out).NotTo(ContainSubstring("coverage required"))
			code, out = gateReport(ctx, filepath.Join(reportDir, "report.json"), "--require-coverage")
			Expect(code).To(Equal(report.ExitFail), out)
			Expect(out).To(ContainSubstring("iptables not inspected (" + hiddenNFT + ")"))
		}, SpecTimeout(suiteRunTimeout))
	})
})

// gateReport runs `cnifault gate` with the project's expectations and
// flags on a written report.
func gateReport(ctx context.Context, path string, flags ...string) (int, string) {
	GinkgoHelper()
	args := append(append([]string{"gate", "--known-failures", filepath.Join(repoRoot, "hack", "known-failures.yaml")}, flags...), path)
	return combinedExit(exec.CommandContext(ctx, suiteBinary(), args...))
}
