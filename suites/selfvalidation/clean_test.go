package selfvalidation_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
)

// cleanTimeout bounds the spec: two runs' bring-ups, the clean, and the
// live run's control scenario and teardown.
const cleanTimeout = 5 * time.Minute

// instanceDirs are the managed instances' work dirs under workDir.
func instanceDirs(workDir string) []string {
	records, _ := filepath.Glob(filepath.Join(workDir, "*", "instance.json"))
	var dirs []string
	for _, r := range records {
		dirs = append(dirs, filepath.Dir(r))
	}
	return dirs
}

// daemonPid is the live daemon of the instance in dir.
func daemonPid(g Gomega, dir string) int {
	pidFiles, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	g.Expect(pidFiles).To(HaveLen(1), "the daemon's pid file in %s", dir)
	pid, err := host.ReadPidFile(pidFiles[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(host.Alive(pid)).To(BeTrue(), "the daemon of %s", dir)
	return pid
}

// residueOf is what the run whose id is run left on the node: every entry
// of the node's state that names it (its state and work dirs, mounts,
// bridge, cgroups, cache entries, a shim's argv), and every process in its
// cgroups (a pause names no run).
func residueOf(run string) []string {
	s := takeNodeState()
	var out []string
	for _, entries := range [][]string{s.Processes, s.Mounts, s.Links, s.Files} {
		for _, e := range entries {
			if strings.Contains(e, run) {
				out = append(out, e)
			}
		}
	}
	for _, p := range s.Processes {
		var pid int
		if _, err := fmt.Sscan(p, &pid); err != nil {
			continue
		}
		if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.Contains(string(cg), "/cnifault-"+run+"-") && !slices.Contains(out, p) {
			out = append(out, p+" (in the run's cgroup)")
		}
	}
	return out
}

var _ = Describe("cnifault clean", Label("interrupt", "sweep", "clean"), Serial, func() {
	When("a run was killed outright beside a live one", func() {
		DescribeTable("sweeps every process, mount, link, cgroup and dir of the killed run, and leaves the live run untouched",
			func(ctx SpecContext, killedRuntime string) {
				before := takeNodeState()
				workDir := filepath.Join(repoRoot, "_output", "work-clean")
				reports := filepath.Join(repoRoot, "_output", "reports")

				By("starting a run that stays live: its harness stopped (SIGSTOP) in its control scenario, holding its instance")
				live := suiteCommand(ctx, "containerd-2.4", filepath.Join(reports, "clean-live"), workDir, "-ginkgo.label-filter=control")
				liveOut := gbytes.NewBuffer()
				live.Stdout, live.Stderr = liveOut, GinkgoWriter
				Expect(live.Start()).To(Succeed())
				DeferCleanup(stopHarness, live)
				DeferCleanup(func() { _ = live.Process.Signal(syscall.SIGCONT) })
				Eventually(liveOut).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +healthy-network`))
				Expect(live.Process.Signal(syscall.SIGSTOP)).To(Succeed())
				var liveDir string
				var livePid int
				Eventually(func(g Gomega) {
					dirs := instanceDirs(workDir)
					g.Expect(dirs).To(HaveLen(1))
					liveDir = dirs[0]
					livePid = daemonPid(g, liveDir)
				}).WithContext(ctx).Should(Succeed())
				own.record(liveDir)

				By("starting a second run on " + killedRuntime + " in the same work dir, and killing it with SIGKILL mid-scenario")
				// One process: a parallel run killed outright has its
				// processes told by the kernel, and they tear down on their
				// own (parallel_test.go); one process killed leaves its
				// instance to the sweep.
				killed := suiteCommand(ctx, killedRuntime, filepath.Join(reports, "clean-killed"), workDir, "--procs", "1")
				killedOut := gbytes.NewBuffer()
				killed.Stdout, killed.Stderr = killedOut, GinkgoWriter
				Expect(killed.Start()).To(Succeed())
				DeferCleanup(stopHarness, killed)
				Eventually(killedOut).WithContext(ctx).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(gbytes.Say(`RUN +\S+`))
				var killedDir string
				Eventually(func(g Gomega) {
					var others []string
					for _, d := range instanceDirs(workDir) {
						if d != liveDir {
							others = append(others, d)
						}
					}
					g.Expect(others).To(HaveLen(1))
					killedDir = others[0]
					daemonPid(g, killedDir)
				}).WithContext(ctx).Should(Succeed())
				own.record(killedDir)
				run := instanceName.FindStringSubmatch(filepath.Base(killedDir))[1]
				Expect(killed.Process.Signal(syscall.SIGKILL)).To(Succeed())
				_ = killed.Wait()
				left := residueOf(run)
				Expect(left).NotTo(BeEmpty(), "a killed harness leaves its instance behind")
				GinkgoWriter.Printf("the killed run %s left %d things:\n  %s\n", run, len(left), strings.Join(left, "\n  "))

				By("running cnifault clean")
				clean := exec.CommandContext(ctx, suiteBinary(), "clean", "--work-dir", workDir)
				clean.Dir = repoRoot
				out, err := clean.CombinedOutput()
				GinkgoWriter.Printf("%s\n", out)
				Expect(err).NotTo(HaveOccurred(), "cnifault clean:\n%s", out)
				Expect(string(out)).To(ContainSubstring("sweeping stale instance " + killedDir))
				Expect(string(out)).To(ContainSubstring("left alone: " + liveDir + " (a live run holds it)"))
				Expect(string(out)).To(ContainSubstring("cnifault clean: swept 1 killed run instance(s), restored 0 killed external-mode run(s), left 1 live one(s) alone"))

				By("finding nothing of the killed run on the node")
				Expect(residueOf(run)).To(BeEmpty(), "what cnifault clean left of the killed run")
				Expect(killedDir).NotTo(BeADirectory())
				Expect(filepath.Join(stateRoot, run+"-p1")).NotTo(BeADirectory())

				By("finding the live run's instance as it was, and letting the run go on")
				Expect(liveDir).To(BeADirectory())
				Expect(daemonPid(Default, liveDir)).To(Equal(livePid), "the live run's daemon")
				Expect(live.Process.Signal(syscall.SIGCONT)).To(Succeed())
				Expect(live.Wait()).To(Succeed(), "the live run:\n%s", liveOut.Contents())
				r, err := report.Read(filepath.Join(reports, "clean-live", "report.json"))
				Expect(err).NotTo(HaveOccurred())
				Expect(r.Scenario("healthy-network").Verdict).To(Equal(report.Pass))

				By("inspecting the node")
				expectNoResidue(ctx, before)
			},
			Entry("a killed containerd-2.4 run", "containerd-2.4", SpecTimeout(cleanTimeout)),
			Entry("a killed crio-1.34 run", "crio-1.34", SpecTimeout(cleanTimeout)),
		)
	})
})
