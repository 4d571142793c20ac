package selfvalidation_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
)

// concurrentTimeout bounds two gated runs at once on the machine's 2 cores.
const concurrentTimeout = 4 * time.Minute

// startedRun is a suite run going on in the background.
type startedRun struct {
	cmd       *exec.Cmd
	out       *gbytes.Buffer
	reportDir string
}

// startRun starts a gated run on containerd-2.4 writing to reportDir, its
// instance under workDir.
func startRun(ctx context.Context, reportDir, workDir string) *startedRun {
	GinkgoHelper()
	Expect(os.RemoveAll(reportDir)).To(Succeed())
	r := &startedRun{cmd: suiteCommand(ctx, "containerd-2.4", reportDir, workDir, partialOnly),
		out: gbytes.NewBuffer(), reportDir: reportDir}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	Expect(r.cmd.Start()).To(Succeed())
	DeferCleanup(stopHarness, r.cmd)
	return r
}

// wait waits for the run to end and reads its report.
func (r *startedRun) wait() run {
	GinkgoHelper()
	err := r.cmd.Wait()
	res := run{Output: string(r.out.Contents())}
	GinkgoWriter.Printf("%s\n", res.Output)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	res.Report, err = report.Read(filepath.Join(r.reportDir, "report.json"))
	Expect(err).NotTo(HaveOccurred(), res.Output)
	return res
}

// expectPinned asserts that a gated run on containerd-2.4 gave every
// scenario it ran the verdict, leaked kinds and reclaim pinned for it.
func expectPinned(r run, which string) {
	GinkgoHelper()
	Expect(r.Report.HarnessError).To(BeEmpty(), "the %s run:\n%s", which, r.Output)
	Expect(r.ExitCode).To(Equal(report.ExitFail), "the %s run:\n%s", which, r.Output)
	var ids []string
	for _, s := range r.Report.Scenarios {
		if s.Verdict == report.Skipped {
			continue // outside the label filter
		}
		ids = append(ids, s.ID)
		expectSignature(&s, expected["containerd-2.4"][s.ID], "in the "+which+" run")
	}
	var want []string
	for _, row := range catalogRows() {
		if row.has("fault:partial") || row.has(report.LabelControl) {
			want = append(want, row.id)
		}
	}
	Expect(ids).To(ConsistOf(want), "the scenarios of %s", partialOnly)
}

var _ = Describe("Two runs at once in one checkout", Label("concurrent"), Serial, func() {
	var before *nodeState

	BeforeEach(func() {
		before = takeNodeState()
	})

	It("both give the pinned verdicts, and neither sweeps nor reads the other's instance", func(ctx SpecContext) {
		// One work dir for both, as two `make e2e` in one checkout share
		// _output/work: the second's bring-up sweeps it while the first runs.
		workDir := filepath.Join(repoRoot, "_output", "work-concurrent")
		reports := filepath.Join(repoRoot, "_output", "reports")

		By("starting a run and waiting until a scenario of it is running")
		first := startRun(ctx, filepath.Join(reports, "concurrent-a"), workDir)
		Eventually(first.out).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +\S+`))

		By("starting a second run beside it, with its own report dir")
		second := startRun(ctx, filepath.Join(reports, "concurrent-b"), workDir)

		By("starting a third run on the first's report dir")
		third := suiteCommand(ctx, "containerd-2.4", first.reportDir, workDir, partialOnly)
		out, err := third.CombinedOutput()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "the third run: %v\n%s", err, out)
		Expect(exit.ExitCode()).To(Equal(report.ExitHarness), string(out))
		// Had it waited for the lock, it would return only after the first
		// run ended.
		Expect(host.Alive(first.cmd.Process.Pid)).To(BeTrue(), "the third run must be refused at once, not wait for the first to end")
		Expect(strings.TrimSpace(string(out))).To(And(ContainSubstring("in use by another run"), Not(ContainSubstring("\n"))),
			"one clear line")

		By("waiting for both runs")
		a, b := first.wait(), second.wait()
		expectPinned(a, "first")
		expectPinned(b, "second")

		By("inspecting the node")
		expectNoResidue(ctx, before)
	}, SpecTimeout(concurrentTimeout))
})
