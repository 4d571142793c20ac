package selfvalidation_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
)

// SlowNodeEnv names the managed runtimes the slow-node spec runs, separated
// by spaces or commas: `make slow` sets it (crio-1.36 by default). Unset,
// as in `make test`, it is containerd-2.4.
const SlowNodeEnv = "CNIFAULT_SLOW_RUNTIMES"

// slowNodeDivisor makes the slow node: the run's cgroup gets one CPU's
// period divided by it (a quarter of one CPU).
const slowNodeDivisor = 4

// slowRunTimeout bounds one catalog on a quarter of one CPU, a backstop
// beyond the run's own bounds: crio-1.36 took 767 s (12.8 min) and
// containerd-2.4 361 s before the harness's waits became event-driven,
// on a machine others were loading too. slowSuiteTimeout is the run's
// own Ginkgo timeout inside it, leaving the teardown its grace.
const (
	slowRunTimeout   = 50 * time.Minute
	slowSuiteTimeout = 40 * time.Minute
)

// slowRuntimes are the runtimes SlowNodeEnv names.
func slowRuntimes() []string {
	names := strings.FieldsFunc(os.Getenv(SlowNodeEnv), func(r rune) bool { return r == ',' || r == ' ' })
	if len(names) == 0 {
		return []string{"containerd-2.4"}
	}
	return names
}

// slowRun is one runtime's catalog run with the harness, the runtime, its
// shims and its plugins in one cgroup limited to a quarter of one CPU:
// a slow node. Pods go there too (--cgroup-root), because CRI-O places its
// conmons in their pod's cgroup.
type slowRun struct {
	runtime string
	run
	limit *host.CPULimit
	// took is the run's wall time; load the load average before and after.
	took       time.Duration
	load       [2]string
	stat       host.CPUStat
	seen       map[string]bool
	outside    []string
	residue    *nodeState
	sampleErrs []error
}

func (s *slowRun) of(runtime string) run {
	GinkgoHelper()
	Expect(runtime).To(Equal(s.runtime))
	Expect(s.Report).NotTo(BeNil(), "the slow run of %s wrote no report:\n%s", runtime, s.Output)
	return s.run
}

// slowLimitName is the self-validation's CPU limit: named for its pid, so
// that a later self-validation can tell a dead one's (sweepSlowLimits).
func slowLimitName() string { return fmt.Sprintf("/cnifault-slow-%d", os.Getpid()) }

// sweepSlowLimits removes the empty CPU limits of self-validations that
// are no longer running (killed before their cleanup ran).
func sweepSlowLimits() {
	for _, c := range host.CgroupGlob("/cnifault-slow-*") {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(c), "cnifault-slow-"))
		if err != nil || host.Alive(pid) {
			continue
		}
		name := "/" + filepath.Base(c)
		if err := host.RemoveCgroupTree(name); err != nil {
			GinkgoWriter.Printf("not removing a dead self-validation's CPU limit %s: %v\n", name, err)
		}
	}
}

// start runs the catalog inside a new CPU limit, sampling every process of
// the run meanwhile, and removes the limit once the run has torn down.
func (s *slowRun) start(ctx SpecContext) {
	GinkgoHelper()
	sweepSlowLimits()
	s.residue = takeNodeState()
	var err error
	s.limit, err = host.NewCPULimit(slowLimitName(), slowNodeDivisor)
	Expect(err).NotTo(HaveOccurred())
	// Also when the run is interrupted: the harness (SIGTERM from the
	// node's context) tears down first, then its processes are gone.
	DeferCleanup(func(ctx SpecContext) { removeLimit(ctx, s.limit) }, NodeTimeout(residueSettle+10*time.Second))

	reportDir := filepath.Join(repoRoot, "_output", "slow", s.runtime)
	Expect(os.RemoveAll(reportDir)).To(Succeed())
	Expect(os.MkdirAll(reportDir, 0o755)).To(Succeed())
	args := append([]string{"--runtime", s.runtime, "--report-dir", reportDir, "--cgroup-root", s.limit.Name},
		runFlags(filepath.Join(repoRoot, "_output", "work-slow"))...)
	// One process: the slow node is one catalog's timing on a quarter of
	// one CPU, which processes at once would only share (the waits they
	// overlap on an idle node are CPU there), and its bounds were set for
	// one.
	args = append(args, "-ginkgo.timeout="+slowSuiteTimeout.String(), "--procs", "1")
	cmd := harnessCommand(ctx, args...)
	cmd.Args = s.limit.Wrap(append([]string{suiteBinary()}, args...))
	cmd.Path = cmd.Args[0]
	out, err := os.Create(filepath.Join(reportDir, "run.log"))
	Expect(err).NotTo(HaveOccurred())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out

	s.load[0] = loadAverage()
	begin := time.Now()
	Expect(cmd.Start()).To(Succeed())
	stop := s.sample(cmd.Process.Pid)
	err = cmd.Wait()
	s.took = time.Since(begin)
	stop()
	s.load[1] = loadAverage()
	s.stat, _ = s.limit.Stat()

	raw, _ := os.ReadFile(filepath.Join(reportDir, "run.log"))
	s.Output, s.Dir, s.ExitCode = string(raw), reportDir, 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		s.ExitCode = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred(), "running the catalog on the slow node")
	}
	s.Report, err = report.Read(filepath.Join(reportDir, "report.json"))
	Expect(err).NotTo(HaveOccurred(), "the slow run wrote no readable report:\n%s", s.Output)
	own.recordEndpoint(s.Report.Runtime.Endpoint)
	summary := fmt.Sprintf("%s on a quarter of one CPU (cpu quota %d µs per %d µs): catalog run %s, exit %d; "+
		"load average before %s, after %s; throttled in %d of %d periods",
		s.runtime, s.limit.Quota, s.limit.Period, s.took.Round(time.Second), s.ExitCode, s.load[0], s.load[1],
		s.stat.Throttled, s.stat.Periods)
	AddReportEntry("slow node", summary)
	GinkgoWriter.Println(summary)
	Expect(os.WriteFile(filepath.Join(reportDir, "times.txt"), []byte(summary+"\n"), 0o644)).To(Succeed())
	removeLimit(ctx, s.limit)
}

// removeLimit waits for the limit's processes to be gone and removes it.
func removeLimit(ctx SpecContext, l *host.CPULimit) {
	GinkgoHelper()
	if len(host.CgroupPaths(l.Name)) == 0 {
		return
	}
	Eventually(l.Remove).WithContext(ctx).WithTimeout(residueSettle).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// sample records, every 100 ms until stop, every live process this
// self-validation's run has (its descendants: it is a child subreaper, so
// shims and conmons that daemonized come back to it), and each one seen
// outside the limit in the cpu controller's hierarchy. The wrapper joins
// the limit before it execs the harness: only until then may the harness's
// own pid be outside.
func (s *slowRun) sample(harness int) (stop func()) {
	s.seen = map[string]bool{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	joined := false
	check := func() {
		table, err := host.ReadProcTable()
		if err != nil {
			s.sampleErrs = append(s.sampleErrs, err)
			return
		}
		byPID := map[int]host.ProcInfo{}
		for _, p := range table {
			byPID[p.PID] = p
		}
		for pid := range host.Descendants(table, os.Getpid()) {
			p := byPID[pid]
			if p.Zombie() {
				continue
			}
			if pid == harness && !joined {
				if joined = s.limit.Holds(pid); !joined {
					continue
				}
			}
			if s.limit.Holds(pid) {
				s.seen[p.Comm] = true
				continue
			}
			// The kernel moves an exiting process to the root cgroup
			// (cgroup_exit), after it set PF_EXITING: such a one left
			// the limit by ending.
			raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			if !exiting(pid) {
				s.outside = append(s.outside, fmt.Sprintf("%d %s (%s)", pid, strings.Join(p.Argv, " "),
					strings.Join(strings.Fields(string(raw)), " ")))
			}
		}
	}
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				check()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h).
const pfExiting = 0x4

// exiting tells whether the process pid is gone, a zombie, or on its way
// out (PF_EXITING in /proc/<pid>/stat's flags).
func exiting(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err != nil || flags&pfExiting != 0
}

// loadAverage is /proc/loadavg's three averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// versionOf is the version a managed runtime must report.
func versionOf(runtime string) string {
	for _, rt := range managedRuntimes {
		if rt.name == runtime {
			return rt.version
		}
	}
	panic(fmt.Sprintf("%s=%q: %s is not a managed runtime", SlowNodeEnv, os.Getenv(SlowNodeEnv), runtime))
}

// A slow node is not a broken one: the waits a verdict rests on wait for
// the runtime's events, count rounds or are the contract's own values, so
// that the catalog run on a quarter of one CPU gives every scenario the
// verdict and signature the idle run pins (hack/known-failures.yaml).
var _ = Describe("The catalog on a node of a quarter of one CPU", Label("slow-node"), Serial, func() {
	for _, name := range slowRuntimes() {
		s := &slowRun{runtime: name}
		Context("with the harness, "+name+", its shims and its plugins in one CPU-limited cgroup", Ordered, ContinueOnFailure, func() {
			BeforeAll(func(ctx SpecContext) {
				s.start(ctx)
			}, NodeTimeout(slowRunTimeout), GracePeriod(harnessTeardownGrace))

			It("kept every process of the run inside the limit, and the kernel throttled them", func() {
				Expect(s.sampleErrs).To(BeEmpty())
				Expect(s.outside).To(BeEmpty(), "processes of the run outside %s", s.limit.Name)
				comms := slices.Sorted(func(yield func(string) bool) {
					for c := range s.seen {
						if !yield(c) {
							return
						}
					}
				})
				GinkgoWriter.Printf("seen inside the limit: %v\n", comms)
				daemon, shim := "containerd", "containerd-shim"
				if strings.HasPrefix(name, "crio-") {
					daemon, shim = "crio", "conmon"
				}
				harness := filepath.Base(suiteBinary())
				harness = harness[:min(len(harness), 15)] // the kernel's comm
				Expect(comms).To(ContainElements(harness, daemon, shim, "cni-fault"),
					"the samples must have met the harness, the runtime, a shim and a plugin")
				Expect(s.stat.Throttled).To(BeNumerically(">", 0), "the limit never throttled the run: %+v", s.stat)
			})

			describeRuntime(s, name, versionOf(name), report.ExitFail)

			It("leaves nothing on the node, its CPU limit included", func(ctx SpecContext) {
				expectNoResidue(ctx, s.residue)
				Expect(host.CgroupPaths(s.limit.Name)).To(BeEmpty())
			}, SpecTimeout(residueSettle+10*time.Second))
		})
	}
})
