package selfvalidation_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// parallelProcs is --procs of a run in parallel processes: the default on
// this machine, which every run without --procs gets.
var parallelProcs = strconv.Itoa(cli.DefaultProcs())

// agreementRuntimes are one runtime of each family whose catalog runs in
// one process beside the matrix's runs in parallel processes.
var agreementRuntimes = []string{"containerd-2.4", "crio-1.36"}

// serialMatrixDir holds the catalogs run in one process each.
func serialMatrixDir() string { return filepath.Join(repoRoot, "_output", "matrix-serial") }

// describeSerialAgreement declares, after the matrix whose catalogs ran in
// parallel processes, the same build's catalogs of agreementRuntimes run
// in one process each (side by side, as a matrix), and that the two runs
// of each agree scenario by scenario: every scenario held to its pins in
// both (verdict.Compare), and each run's outcome held against the other's
// with the same comparison (verdict.Disagreements: the verdict, the kinds
// leaked with their counts, the reclaim, teardown, growth, DEL, faults
// fired, the storm rule, a skip's reason) except where the pins name a
// race, whose side may differ between any two runs.
func describeSerialAgreement(m *matrixRun) {
	Context("run in one process", Label("parallel"), Ordered, func() {
		serial := map[string]*report.Report{}
		BeforeAll(func(ctx SpecContext) {
			Expect(os.RemoveAll(serialMatrixDir())).To(Succeed())
			cmd := harnessCommand(ctx, append([]string{"matrix", "--runtimes", strings.Join(agreementRuntimes, ","),
				"--out", serialMatrixDir(), "--", "--procs", "1"}, runFlags(filepath.Join(repoRoot, "_output", "work"))...)...)
			code, out := combinedExit(cmd)
			Expect(code).To(Equal(report.ExitFail), out)
			for _, rt := range agreementRuntimes {
				r, err := report.Read(filepath.Join(serialMatrixDir(), rt, "report.json"))
				Expect(err).NotTo(HaveOccurred(), out)
				own.recordEndpoint(r.Runtime.Endpoint)
				serial[rt] = r
			}
		}, NodeTimeout(2*suiteRunTimeout), GracePeriod(harnessTeardownGrace))

		for _, rt := range agreementRuntimes {
			It("gives "+rt+"'s catalog the verdicts and signatures it has in parallel processes", func() {
				one, par := serial[rt], m.of(rt).Report
				Expect(one.Processes).To(Equal(1), "the run given --procs 1")
				Expect(par.Processes).To(Equal(cli.DefaultProcs()), "the matrix's run, without --procs")
				Expect(par.Serial).To(BeEmpty())
				for _, want := range []struct {
					r     *report.Report
					where string
				}{{one, "in one process"}, {par, "in " + parallelProcs + " processes"}} {
					Expect(want.r.HarnessError).To(BeEmpty(), want.where)
					for _, s := range want.r.Scenarios {
						expectSignature(&s, expected[rt][s.ID], "on "+rt+" "+want.where)
					}
				}
				Expect(verdict.Disagreements(one, par, func(id string) verdict.Expectation { return expected[rt][id] })).To(BeEmpty(),
					"%s: scenarios whose outcome in %s processes differs from one process's", rt, parallelProcs)
				raced := 0
				for _, s := range one.Scenarios {
					p := par.Scenario(s.ID)
					Expect(s.Process).To(BeZero(), "%s: one process's run names no process", s.ID)
					if s.Verdict != report.Skipped || s.Reason != "" {
						Expect(p.Process).To(BeNumerically(">=", 1), "%s: the parallel run names the process that ran it", s.ID)
					}
					if expected[rt][s.ID].Race != "" {
						raced++
					}
					Expect(p.Lacks).To(Equal(s.Lacks), "%s on %s: what a skip lacks", s.ID, rt)
				}
				AddReportEntry("agreement", fmt.Sprintf("%s: %d scenarios agree (%d pinned to a race, whose sides may differ)", rt, len(one.Scenarios), raced))
			})
		}
	})
}

// A run in parallel processes leaves no residue when it or one of its
// processes is killed outright, as a run in one process leaves none that
// the next run does not sweep (killed_test.go, interrupt_test.go).
var _ = Describe("A run in parallel processes", Label("parallel", "interrupt"), Serial, func() {
	var before *nodeState
	var workDir, reportDir string

	BeforeEach(func() {
		before = takeNodeState()
		workDir = filepath.Join(repoRoot, "_output", "work-parallel")
		reportDir = filepath.Join(repoRoot, "_output", "reports", "parallel")
		Expect(os.RemoveAll(reportDir)).To(Succeed())
	})

	When("the run is killed outright (SIGKILL)", func() {
		It("has each process tear its instance down on its own, leaving nothing", func(ctx SpecContext) {
			cmd := suiteCommand(ctx, "containerd-2.4", reportDir, workDir, "--procs", parallelProcs)
			out := gbytes.NewBuffer()
			cmd.Stdout, cmd.Stderr = out, GinkgoWriter
			Expect(cmd.Start()).To(Succeed())
			DeferCleanup(stopHarness, cmd)

			By("waiting until the processes' runtimes are up and a scenario is running")
			Eventually(out).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +\S+`))
			Eventually(startedRuntime(workDir)).WithContext(ctx).Should(Succeed())
			procs := processesOf(cmd.Process.Pid)
			Expect(procs).NotTo(BeEmpty())

			By("killing the run with SIGKILL")
			Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
			_ = cmd.Wait()

			By("waiting for its processes, told by the kernel (PR_SET_PDEATHSIG), to tear down")
			Eventually(func(g Gomega) {
				for _, pid := range procs {
					g.Expect(host.Alive(pid)).To(BeFalse(), "process %d of the killed run", pid)
				}
				g.Expect(takeNodeState()).To(matchNodeState(before))
			}).WithContext(ctx).WithTimeout(interruptTimeout - 10*time.Second).Should(Succeed())
		}, SpecTimeout(interruptTimeout))
	})

	When("one of its processes is killed outright (SIGKILL)", func() {
		It("reports that process's scenarios as errors and exits 2; the next run sweeps its instance", func(ctx SpecContext) {
			cmd := suiteCommand(ctx, "containerd-2.4", reportDir, workDir, "--procs", "2",
				"-ginkgo.label-filter=fault:teardown || control")
			out := gbytes.NewBuffer()
			cmd.Stdout, cmd.Stderr = out, out
			// Runs last: where the spec fails before the next run has swept
			// the killed process's instance, it is swept here, so that one
			// failure is not the suite's residue too.
			DeferCleanup(func(ctx SpecContext) {
				clean, err := exec.CommandContext(ctx, suiteBinary(), "clean", "--work-dir", workDir).CombinedOutput()
				GinkgoWriter.Printf("cnifault clean: %s\n", clean)
				Expect(err).NotTo(HaveOccurred(), "cnifault clean:\n%s", clean)
			}, NodeTimeout(cleanTimeout))
			Expect(cmd.Start()).To(Succeed())
			DeferCleanup(stopHarness, cmd)

			By("waiting until both processes' runtimes are up and a scenario is running")
			Eventually(out).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +\S+`))
			Eventually(startedRuntime(workDir)).WithContext(ctx).Should(Succeed())
			var victim int
			Eventually(func(g Gomega) {
				procs := processesOf(cmd.Process.Pid)
				g.Expect(procs).To(HaveLen(2))
				victim = procs[1]
			}).WithContext(ctx).Should(Succeed())
			// A process owns the scenarios it has taken; on a loaded node
			// the victim may still be bringing its runtime up while the
			// other takes the first ones. Two scenarios running at once
			// are one in each process: the victim has a share to lose.
			Eventually(func() int { return runningScenarios(out.Contents()) }).
				WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(20*time.Millisecond).Should(Equal(2), "both processes running a scenario")

			By(fmt.Sprintf("killing process %d of the run with SIGKILL", victim))
			Expect(syscall.Kill(victim, syscall.SIGKILL)).To(Succeed())
			code, output := waitExit(cmd, out)
			Expect(code).To(Equal(report.ExitHarness), output)
			r, err := report.Read(filepath.Join(reportDir, "report.json"))
			Expect(err).NotTo(HaveOccurred(), output)
			Expect(r.HarnessError).To(MatchRegexp(`process \d wrote no report \(signal: killed`))
			killed := 0
			for _, s := range r.Scenarios {
				if strings.Contains(s.Failure, "wrote no report (signal: killed") {
					Expect(s.Verdict).To(Equal(report.Error), s.ID)
					killed++
				}
			}
			Expect(killed).To(BeNumerically(">", 0), "the killed process's share is in the report as errors")
			Expect(filepath.Join(reportDir, "junit.xml")).To(BeAnExistingFile())

			By("running the catalog's control on the same runtime and work dir")
			next := suiteCommand(ctx, "containerd-2.4", filepath.Join(reportDir, "next"), workDir, "-ginkgo.label-filter=control", "-ginkgo.v")
			output2, err := next.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "the next run:\n%s", output2)
			Expect(string(output2)).To(ContainSubstring("sweeping stale instance"))

			By("inspecting the node")
			expectNoResidue(ctx, before)
		}, SpecTimeout(killedTimeout))
	})
})

// runningScenarios counts the scenarios a run's progress shows started
// and not yet ended: a RUN line each, then its verdict's line.
func runningScenarios(progress []byte) int {
	started := regexp.MustCompile(`(?m)^RUN +\S+`).FindAll(progress, -1)
	verdicts := strings.ToUpper(strings.Join(report.Verdicts, "|"))
	ended := regexp.MustCompile(`(?m)^(`+verdicts+`) +\S+ +[0-9.]+s$`).FindAll(progress, -1)
	return len(started) - len(ended)
}

// processesOf are the run's processes: its children running this binary.
func processesOf(run int) []int {
	table, _ := host.ReadProcTable()
	var out []int
	for _, p := range table {
		if p.PPID == run && !p.Zombie() && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == filepath.Base(suiteBinary()) {
			out = append(out, p.PID)
		}
	}
	slices.Sort(out)
	return out
}

// waitExit waits for a started run and returns its exit status and output.
func waitExit(cmd interface{ Wait() error }, out *gbytes.Buffer) (int, string) {
	GinkgoHelper()
	err := cmd.Wait()
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		return ee.ExitCode(), string(out.Contents())
	}
	Expect(err).NotTo(HaveOccurred(), string(out.Contents()))
	return 0, string(out.Contents())
}
