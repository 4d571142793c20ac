package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
)

// bench is one make bench: what ran and what it measured.
type bench struct {
	dir   string
	cores int
	log   io.Writer

	catalogs  []pair
	sweeps    []sweepRun
	matrixRun *matrixRun
	test      *ciRun
	// selfValidation is make selfvalidate's spec by spec time, from the
	// same .ci/run as test.
	selfValidation *svTimes
	// kubelet is make kubelet-check's reports, one per runtime.
	kubelet      []kubeletCheck
	load0, load1 string
	failed       bool
}

// catalogRun is one catalog run as hack/gate.sh (make e2e) makes it.
type catalogRun struct {
	runtime string
	// procs is --procs as given, 0 for cnifault's default.
	procs int
	wall  time.Duration
	// cpu is the user and system time of everything the run started: the
	// harness's processes, the runtime, its shims and conmons, runc, the
	// plugins, the pods.
	cpu  time.Duration
	rep  *report.Report
	exit int
}

// processes is how many processes the run used.
func (c catalogRun) processes() int {
	if c.rep != nil && c.rep.Processes > 0 {
		return c.rep.Processes
	}
	return max(c.procs, 1)
}

// pair is a runtime's catalog in one process and in cnifault's default.
type pair struct {
	runtime          string
	serial, parallel catalogRun
}

// sweepRun is a runtime's catalog for each --procs.
type sweepRun struct {
	runtime string
	runs    []catalogRun
}

// matrixRun is the matrix of parallel catalogs side by side.
type matrixRun struct {
	jobs    int
	wall    time.Duration
	cpu     time.Duration
	reports []*report.Report
}

// catalog runs rt's catalog with --procs procs (0: cnifault's default) the
// way make e2e does (hack/gate.sh, known failures given), and measures it.
func (b *bench) catalog(rt string, procs int) catalogRun {
	c := catalogRun{runtime: rt, procs: procs}
	name := rt + "-default"
	var args []string
	if procs > 0 {
		name = rt + "-" + strconv.Itoa(procs)
		args = append(args, "--procs", strconv.Itoa(procs))
	}
	dir := filepath.Join(b.dir, "catalogs", name)
	if err := os.RemoveAll(dir); err != nil {
		b.fail(rt, err)
		return c
	}
	fmt.Fprintf(b.log, "[bench] %s, --procs %s, into %s (load average %s)\n", rt, procsText(procs), dir, loadAverage())
	cmd := exec.Command("bash", append([]string{"hack/gate.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "CNIFAULT_GATE_PREPARED=1", "RUNTIME="+rt, "REPORT_DIR="+dir,
		"KNOWN_FAILURES="+knownFailures, "CI=1")
	cmd.Stdout, cmd.Stderr = b.log, b.log
	c.wall, c.cpu, c.exit = measure(cmd)
	rep, err := report.Read(filepath.Join(dir, "report.json"))
	if err != nil {
		b.fail(rt, fmt.Errorf("exit status %d and no report: %w", c.exit, err))
		return c
	}
	c.rep = rep
	return c
}

func procsText(n int) string {
	if n == 0 {
		return "default"
	}
	return strconv.Itoa(n)
}

// reuse is a run of rt with n processes that the catalogs already made.
func (b *bench) reuse(rt string, n int) *catalogRun {
	for _, p := range b.catalogs {
		if p.runtime != rt {
			continue
		}
		if n == 1 {
			return &p.serial
		}
		if p.parallel.rep != nil && p.parallel.processes() == n {
			return &p.parallel
		}
	}
	return nil
}

// matrix runs the matrix of every managed runtime, jobs at once, each
// catalog in cnifault's default processes (hack/matrix.sh: make matrix).
func (b *bench) matrix(jobs int) matrixRun {
	m := matrixRun{jobs: jobs}
	dir := filepath.Join(b.dir, "matrix")
	if err := os.RemoveAll(dir); err != nil {
		b.fail("matrix", err)
		return m
	}
	fmt.Fprintf(b.log, "[bench] the matrix, %d at once, into %s (load average %s)\n", jobs, dir, loadAverage())
	cmd := exec.Command("bash", "hack/matrix.sh")
	cmd.Env = append(os.Environ(), "CNIFAULT_GATE_PREPARED=1", "RUNTIMES=", "MATRIX_DIR="+dir, "JOBS="+strconv.Itoa(jobs),
		"KNOWN_FAILURES="+knownFailures, "CI=1")
	cmd.Stdout, cmd.Stderr = b.log, b.log
	var exit int
	m.wall, m.cpu, exit = measure(cmd)
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "report.json"))
	for _, p := range paths {
		if r, err := report.Read(p); err == nil {
			m.reports = append(m.reports, r)
		}
	}
	if exit == report.ExitHarness || len(m.reports) == 0 {
		b.fail("matrix", fmt.Errorf("exit status %d, %d reports", exit, len(m.reports)))
	}
	return m
}

func (b *bench) fail(what string, err error) {
	fmt.Fprintf(b.log, "[bench] %s: %v\n", what, err)
	b.failed = true
}

// measure runs cmd and returns its wall time, the CPU time of everything
// it started (reaped by then: its children by it, whatever it orphaned by
// this process, the subreaper), and its exit status.
func measure(cmd *exec.Cmd) (wall, cpu time.Duration, exit int) {
	before := childrenCPU()
	start := time.Now()
	err := cmd.Run()
	wall = time.Since(start)
	exit = 0
	if err != nil {
		exit = report.ExitHarness
		if st := cmd.ProcessState; st != nil && st.Exited() {
			exit = st.ExitCode()
		}
	}
	awaitOrphans(30 * time.Second)
	return wall, childrenCPU() - before, exit
}

// childrenCPU is the user and system time of this process's children that
// have been waited for, and of theirs.
func childrenCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// awaitOrphans waits up to d for the orphans this process adopted to end,
// and reaps them.
func awaitOrphans(d time.Duration) {
	self := os.Getpid()
	deadline := time.Now().Add(d)
	for {
		host.ReapAdopted()
		table, _ := host.ReadProcTable()
		left := false
		for _, p := range table {
			if p.PPID == self {
				left = true
			}
		}
		if !left || time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ciRunRecord is where .ci/run records how long make test took.
const ciRunRecord = "_output/ci-run.json"

// ciRun is .ci/run's record of its last make test.
type ciRun struct {
	Seconds  float64 `json:"seconds"`
	Exit     int     `json:"exit"`
	Finished string  `json:"finished"`
	Commit   string  `json:"commit"`
	Load     string  `json:"load_average"`
	// CPU is the CPU time of make test's processes and of what they left
	// behind (cnifault-bench cpu), 0 in a record of before it was kept;
	// Cores the machine's.
	CPU   float64 `json:"cpu_seconds"`
	Cores int     `json:"cores"`
}

// floor is make test's CPU over the machine's cores: no schedule of its
// checks on this machine is faster (0: not recorded).
func (r *ciRun) floor() time.Duration {
	if r.CPU == 0 || r.Cores == 0 {
		return 0
	}
	return time.Duration(r.CPU / float64(r.Cores) * float64(time.Second))
}

func readCIRun(path string) *ciRun {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var r ciRun
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return &r
}
