// Command cnifault-bench is `make bench`: in one run, with cached builds,
// it measures every managed runtime's catalog in one process and in
// parallel processes (cnifault's default --procs), the catalog time of the
// reference runtimes for each --procs from 1 to --max-procs, the floor this
// machine allows a parallel catalog, and the ten-runtime matrix with
// parallel catalogs side by side; it reads `make test`'s time from .ci/run's
// own record. It prints each figure and judges the targets (issue 33) in
// that same run, and where one is missed, where the time went. It measures;
// it asserts nothing, so no test ever depends on how fast a machine is.
//
//	cnifault-bench [--out DIR] [--runtimes A,B] [--sweep A,B] [--max-procs N] [--jobs N] [--no-matrix]
//	cnifault-bench failures [FILE]
//	cnifault-bench cpu FILE -- COMMAND...
//
// failures prints what each failed spec of the self-validation's JSON
// report (FILE, default _output/selfvalidation.json) said: .ci/run ends a
// failed make test with it. cpu runs COMMAND and writes into FILE the CPU
// time of every process it started, and of what those left behind, with
// COMMAND's exit status: .ci/run records make test's this way.
//
// Exit status: 0 when every run wrote a report (whatever its verdicts), 2
// when one could not run.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// knownFailures gates every catalog the bench runs, and pins the races two
// runs may differ in (agreement).
const knownFailures = "hack/known-failures.yaml"

// The references: one runtime of each family, whose catalogs are measured
// for every --procs.
var sweepDefault = []string{"containerd-2.4", "crio-1.36"}

func main() {
	if len(os.Args) > 4 && os.Args[1] == "cpu" && os.Args[3] == "--" {
		os.Exit(cpuAccount(os.Args[2], os.Args[4:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "failures" {
		path := selfValidationRecord
		if len(os.Args) > 2 {
			path = os.Args[2]
		}
		if !failuresDigest(os.Stdout, path) {
			os.Exit(report.ExitHarness)
		}
		return
	}
	out := flag.String("out", "_output/bench", "where the runs' reports go")
	list := flag.String("runtimes", strings.Join(runtimes.Managed(), ","), "the runtimes whose catalogs run in one process and in parallel")
	sweep := flag.String("sweep", strings.Join(sweepDefault, ","), "the runtimes whose catalogs run for each --procs from 1 to --max-procs (\"\" for none)")
	maxProcs := flag.Int("max-procs", 6, "the sweep's largest --procs")
	jobs := flag.Int("jobs", runtime.NumCPU(), "runtimes at once in the matrix of parallel catalogs")
	noMatrix := flag.Bool("no-matrix", false, "leave the matrix out")
	flag.Parse()
	if *jobs < 1 || *maxProcs < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: cnifault-bench [--out DIR] [--runtimes A,B] [--sweep A,B] [--max-procs N] [--jobs N] [--no-matrix]")
		os.Exit(report.ExitHarness)
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		fail(err)
	}
	// Whatever a catalog leaves running when its parent exits (a shim, a
	// conmon that daemonized) comes back here, so that its CPU time is
	// counted with the catalog's once it is reaped.
	stop, err := host.AdoptOrphans()
	if err != nil {
		fail(fmt.Errorf("becoming a child subreaper: %w", err))
	}
	defer stop()

	if pins, err = verdict.LoadKnownFailures(knownFailures); err != nil {
		fail(err)
	}
	b := bench{dir: dir, cores: runtime.NumCPU(), log: os.Stderr}
	b.load0 = loadAverage()
	for _, rt := range split(*list) {
		b.catalogs = append(b.catalogs, pair{runtime: rt, serial: b.catalog(rt, 1), parallel: b.catalog(rt, 0)})
	}
	for _, rt := range split(*sweep) {
		s := sweepRun{runtime: rt}
		for n := 1; n <= *maxProcs; n++ {
			if c := b.reuse(rt, n); c != nil {
				s.runs = append(s.runs, *c)
				continue
			}
			s.runs = append(s.runs, b.catalog(rt, n))
		}
		b.sweeps = append(b.sweeps, s)
	}
	if !*noMatrix {
		m := b.matrix(*jobs)
		b.matrixRun = &m
	}
	b.test = readCIRun(ciRunRecord)
	b.selfValidation = readSelfValidation(selfValidationRecord)
	b.kubelet = readKubeletChecks(kubeletCheckRecord)
	b.load1 = loadAverage()
	fmt.Print(b.summary())
	if b.failed {
		os.Exit(report.ExitHarness)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cnifault-bench:", err)
	os.Exit(report.ExitHarness)
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
