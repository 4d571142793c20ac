// Package selfvalidation_test proves the harness's verdicts: it runs the
// compiled CNI suite against the managed runtimes and asserts the verdicts
// the public bug history predicts, and that the run left nothing on the node.
package selfvalidation_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
)

// suiteRunTimeout bounds one whole run of the CNI suite on one runtime: a
// backstop for a harness that hangs, never a deadline a catalog must meet.
// A catalog takes 1.5-3 minutes idle, but 6m35s-7m38s for crio-1.36 on a
// quarter of one CPU (make slow), and at a load average near 60 on 2 cores
// the by-dir containerd 2.0 and 2.4 catalogs were cut at the 5 minutes this
// was before (error "the run was interrupted"): twice the slowest catalog
// measured.
const suiteRunTimeout = 15 * time.Minute

// residueSettle bounds how long what a run made may take to go after the
// run has returned: its orphaned processes to exit, their mounts to go.
const residueSettle = 30 * time.Second

func TestSelfValidation(t *testing.T) {
	RegisterFailHandler(Fail)
	// Before anything is started: whatever a harness run leaves running
	// must come back to this process, for the residue check to find.
	stop, err := host.AdoptOrphans()
	if err != nil {
		t.Fatalf("becoming a child subreaper: %v", err)
	}
	defer stop()
	// Ginkgo's own suite timeout (1 h unless -ginkgo.timeout says) is not
	// go test's: a loaded machine took the self-validation past the hour
	// (load average 48 on 2 cores) while make test allowed 105 minutes.
	// The bound is go test's, less the time the specs' teardown and the
	// residue check need once it is reached.
	suite, reporter := GinkgoConfiguration()
	if d, ok := t.Deadline(); ok && suite.Timeout == time.Hour {
		suite.Timeout = time.Until(d) - suiteTeardownMargin
	}
	RunSpecs(t, "cnifault self-validation", suite, reporter)
}

// suiteTeardownMargin is what Ginkgo's suite timeout leaves of go test's:
// an interrupted harness command's teardown grace and the residue check.
const suiteTeardownMargin = harnessTeardownGrace + residueSettle + time.Minute

var repoRoot string

var _ = BeforeSuite(func() {
	Expect(os.Geteuid()).To(BeZero(), "self-validation runs real runtimes: run as root (make test)")
	out, err := exec.Command("go", "env", "GOMOD").Output()
	Expect(err).NotTo(HaveOccurred())
	repoRoot = filepath.Dir(strings.TrimSpace(string(out)))
	Expect(suiteBinary()).To(BeAnExistingFile(), "build the suite first (make test does)")
	forgetDeadInstanceRecords()
	// Which runs are this self-validation's: their work dirs exist while
	// they run, and the residue check counts only what they made.
	sampling := time.NewTicker(250 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sampling.C:
				own.recordWorkDirs()
			case <-done:
				return
			}
		}
	}()
	DeferCleanup(func() {
		sampling.Stop()
		close(done)
	})
	// Each spec checks the node in its own window; this checks the whole
	// self-validation, so residue between windows cannot hide.
	before := takeNodeState()
	DeferCleanup(func(ctx SpecContext) {
		expectNoResidue(ctx, before, "the node after the whole self-validation")
	}, NodeTimeout(residueSettle+10*time.Second))
})

// expectNoResidue waits until the node holds nothing of this
// self-validation's runs that it did not hold at before.
func expectNoResidue(ctx SpecContext, before *nodeState, description ...any) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(takeNodeState()).To(matchNodeState(before), description...)
	}).WithContext(ctx).WithTimeout(residueSettle).Should(Succeed())
}

func suiteBinary() string {
	if b := os.Getenv("CNIFAULT_SUITE_BINARY"); b != "" {
		return b
	}
	return filepath.Join(repoRoot, "_output", "bin", "cnifault")
}

// run is one run of the CNI suite.
type run struct {
	Report   *report.Report
	ExitCode int
	Output   string
	// Dir is the report dir, where a scenario's artifacts are.
	Dir string
}

// runFlags are the flags every run the self-validation starts gives the
// suite binary, with its instance under workDir: the builds under _output.
func runFlags(workDir string) []string {
	return []string{
		"--work-dir", workDir,
		"--cni-plugin-dir", filepath.Join(repoRoot, "_output", "cni", "bin"),
		"--pause-binary", filepath.Join(repoRoot, "_output", "bin", "cnifault-pause"),
		"--fault-plugin", filepath.Join(repoRoot, "_output", "bin", "cni-fault"),
		"--nri-plugin", filepath.Join(repoRoot, "_output", "bin", "cnifault-nri"),
	}
}

// suiteCommand builds the command line of a suite run writing its report to
// reportDir and its instance under workDir; an empty runtime leaves
// --runtime out, as an external-mode run must.
func suiteCommand(ctx context.Context, runtime, reportDir, workDir string, extra ...string) *exec.Cmd {
	var args []string
	if runtime != "" {
		args = append(args, "--runtime", runtime)
	}
	args = append(append(append(args, "--report-dir", reportDir), runFlags(workDir)...), extra...)
	return harnessCommand(ctx, args...)
}

// harnessCommand is the suite binary run with args from the repo root. A
// spec that runs out of time interrupts it as a user does (SIGTERM, which
// a run, a matrix and a bisect answer by tearing down what they made) and
// gives it harnessTeardownGrace before killing it: killed outright, its
// runs' instances would leave their hung plugins behind on the node.
func harnessCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, suiteBinary(), args...)
	cmd.Dir = repoRoot
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = harnessTeardownGrace
	return cmd
}

// harnessTeardownGrace is how long an interrupted harness command may take
// to tear down: a CRI-O instance may wait out its resource store's release
// (2.5 min) before its cgroup goes.
const harnessTeardownGrace = 4 * time.Minute
