package selfvalidation_test

import (
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
)

// killedTimeout bounds a killed run and the run whose bring-up sweeps it.
const killedTimeout = 3 * time.Minute

var _ = Describe("A run killed outright", Label("interrupt", "sweep"), Serial, func() {
	var before *nodeState
	var workDir string

	BeforeEach(func() {
		before = takeNodeState()
		workDir = filepath.Join(repoRoot, "_output", "work-killed")
	})

	When("the harness gets SIGKILL mid-run", func() {
		DescribeTable("is swept by the next run's bring-up, which leaves nothing", func(ctx SpecContext, runtime string) {
			reports := filepath.Join(repoRoot, "_output", "reports")
			// One process: a parallel run killed outright is its
			// processes' parent, whose death they learn of (parallel_test.go).
			killed := suiteCommand(ctx, runtime, filepath.Join(reports, "killed"), workDir, "--procs", "1")
			out := gbytes.NewBuffer()
			killed.Stdout, killed.Stderr = out, GinkgoWriter
			Expect(killed.Start()).To(Succeed())
			DeferCleanup(stopHarness, killed)

			By("waiting until a scenario is running")
			Eventually(out).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +\S+`))
			Eventually(startedRuntime(workDir)).WithContext(ctx).Should(Succeed())

			By("killing the harness with SIGKILL")
			Expect(killed.Process.Signal(syscall.SIGKILL)).To(Succeed())
			_ = killed.Wait()
			Expect(takeNodeState()).NotTo(matchNodeState(before), "a killed harness leaves its instance behind")

			By("running the catalog's control on the same runtime and work dir")
			next := suiteCommand(ctx, runtime, filepath.Join(reports, "after-killed"), workDir, "-ginkgo.label-filter=control", "-ginkgo.v")
			output, err := next.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "the next run:\n%s", output)
			Expect(string(output)).To(ContainSubstring("sweeping stale instance"))

			By("inspecting the node")
			expectNoResidue(ctx, before)
		},
			Entry("containerd-2.4", "containerd-2.4", SpecTimeout(killedTimeout)),
			Entry("crio-1.34", "crio-1.34", SpecTimeout(killedTimeout)),
		)
	})
})
