package selfvalidation_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/cnifault/cnifault/fixtures/host"
)

// interruptTimeout bounds an interrupted run's teardown.
const interruptTimeout = 90 * time.Second

// startedRuntime waits until a suite run has a live managed runtime in
// workDir: each of its processes (--procs) one instance.
func startedRuntime(workDir string) func(g Gomega) {
	return func(g Gomega) {
		// containerd.pid or crio.pid: the daemon of the managed runtime.
		pidFiles, _ := filepath.Glob(filepath.Join(workDir, "*", "*.pid"))
		g.Expect(pidFiles).NotTo(BeEmpty())
		for _, f := range pidFiles {
			own.record(filepath.Dir(f))
			pid, err := host.ReadPidFile(f)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(host.Alive(pid)).To(BeTrue())
		}
	}
}

// stopHarness interrupts a harness run that a failed spec left running, the
// way a user would, so that it still tears down.
func stopHarness(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

var _ = Describe("An interrupted run", Label("interrupt"), Serial, func() {
	var before *nodeState
	var workDir, reportDir string

	BeforeEach(func() {
		before = takeNodeState()
		workDir = filepath.Join(repoRoot, "_output", "work-interrupt")
		reportDir = filepath.Join(repoRoot, "_output", "reports", "interrupt")
	})

	When("the harness gets SIGTERM or SIGINT while the runtime is up", func() {
		DescribeTable("tears the runtime down and leaves nothing", func(ctx SpecContext, runtime string, sig syscall.Signal, procs string) {
			cmd := suiteCommand(ctx, runtime, reportDir, workDir, "--procs", procs)
			out := gbytes.NewBuffer()
			cmd.Stdout, cmd.Stderr = out, GinkgoWriter
			Expect(cmd.Start()).To(Succeed())
			DeferCleanup(stopHarness, cmd)

			By("waiting until the runtime is up and a scenario is running")
			// The progress line of a scenario's start, printed in CI logs.
			Eventually(out).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +\S+`))
			Eventually(startedRuntime(workDir)).WithContext(ctx).Should(Succeed())

			By(fmt.Sprintf("sending %v to the harness", sig))
			Expect(cmd.Process.Signal(sig)).To(Succeed())
			err := cmd.Wait()
			Expect(err).To(HaveOccurred(), "an interrupted run must not exit 0")

			By("inspecting the node")
			expectNoResidue(ctx, before)
		},
			// In parallel processes (the default) the run hands each of
			// them the interrupt; in one, Ginkgo's handler tears down.
			Entry("containerd-2.4 in parallel processes, SIGTERM", "containerd-2.4", syscall.SIGTERM, parallelProcs, SpecTimeout(interruptTimeout)),
			Entry("containerd-2.4 in parallel processes, SIGINT", "containerd-2.4", syscall.SIGINT, parallelProcs, SpecTimeout(interruptTimeout)),
			Entry("containerd-1.6 in one process", "containerd-1.6", syscall.SIGTERM, "1", SpecTimeout(interruptTimeout)),
			Entry("crio-1.34 in parallel processes", "crio-1.34", syscall.SIGTERM, parallelProcs, SpecTimeout(interruptTimeout)),
		)
	})

	When("the process that started the harness dies (make killed by SIGTERM)", func() {
		It("tears the runtime down and leaves nothing", func(ctx SpecContext) {
			// sh stands in for make: it forks the harness and is then killed.
			cmd := suiteCommand(ctx, "containerd-2.4", reportDir, workDir)
			parent := exec.CommandContext(ctx, "sh", "-c", `"$@"; exit $?`, "sh")
			parent.Args = append(parent.Args, cmd.Args...)
			parent.Dir = cmd.Dir
			Expect(parent.Start()).To(Succeed())

			By("waiting for the managed containerd to come up")
			Eventually(startedRuntime(workDir)).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(Succeed())

			By("killing the harness's parent")
			Expect(parent.Process.Kill()).To(Succeed())
			_ = parent.Wait()

			By("waiting for the orphaned harness to finish its teardown")
			Eventually(func(g Gomega) {
				g.Expect(takeNodeState()).To(matchNodeState(before))
			}).WithContext(ctx).WithTimeout(interruptTimeout - 10*time.Second).Should(Succeed())
		}, SpecTimeout(interruptTimeout))
	})
})
