// Command cnifault-bench is `make bench`: it runs the whole matrix of
// managed runtimes twice with cached builds — one runtime at a time, then
// side by side on every core — and prints, from the reports, each
// runtime's bring-up and catalog time and each matrix's wall time. It
// measures; it asserts nothing, so no test ever depends on how fast a
// machine is.
//
//	cnifault-bench [--out DIR] [--jobs N]
//
// Exit status: 0 when both matrices ran to reports (whatever their
// verdicts), 2 when one could not run.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cnifault/cnifault/fixtures/report"
)

// Targets on the project's reference machine (2 cores): the figures the
// docs/performance.md reports against.
// The catalog targets: without the sustained and storm scenarios (which
// CI may leave out by their labels), and with them (issue 12).
const (
	catalogTarget     = 20 * time.Second
	fullCatalogTarget = 60 * time.Second
	matrixTarget      = 4 * time.Minute
)

func main() {
	out := flag.String("out", "_output/bench", "where each matrix's reports go (OUT/serial, OUT/side-by-side)")
	jobs := flag.Int("jobs", runtime.NumCPU(), "runs at once in the side-by-side matrix")
	flag.Parse()
	if *jobs < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: cnifault-bench [--out DIR] [--jobs N]")
		os.Exit(report.ExitHarness)
	}
	var runs []matrixRun
	for _, m := range []struct {
		name string
		jobs int
	}{{"serial", 1}, {"side-by-side", *jobs}} {
		dir, err := filepath.Abs(filepath.Join(*out, m.name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-bench:", err)
			os.Exit(report.ExitHarness)
		}
		fmt.Fprintf(os.Stderr, "[bench] matrix %s (%d at once) into %s\n", m.name, m.jobs, dir)
		wall, err := runMatrix(dir, m.jobs, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-bench:", err)
			os.Exit(report.ExitHarness)
		}
		r := matrixRun{name: m.name, jobs: m.jobs, wall: wall}
		if r.reports, err = readReports(dir); err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-bench:", err)
			os.Exit(report.ExitHarness)
		}
		runs = append(runs, r)
	}
	fmt.Print(summary(runs))
}

// runMatrix runs hack/matrix.sh (make build has run) and returns its wall
// time; verdicts do not matter here, only that every run wrote a report.
func runMatrix(dir string, jobs int, log io.Writer) (time.Duration, error) {
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	cmd := exec.Command("bash", "hack/matrix.sh")
	cmd.Env = append(os.Environ(), "CNIFAULT_GATE_PREPARED=1", "RUNTIMES=", "MATRIX_DIR="+dir, "JOBS="+strconv.Itoa(jobs))
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == report.ExitFail {
		err = nil // a scenario failed: the runtime's finding, not the bench's
	}
	if err != nil {
		return 0, fmt.Errorf("matrix in %s: %w", dir, err)
	}
	return wall, nil
}

func readReports(dir string) ([]*report.Report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "report.json"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no reports under %s: %v", dir, err)
	}
	var rs []*report.Report
	for _, p := range paths {
		r, err := report.Read(p)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

type matrixRun struct {
	name    string
	jobs    int
	wall    time.Duration
	reports []*report.Report
}

func name(r *report.Report) string {
	if r.Runtime.Managed != "" {
		return r.Runtime.Managed
	}
	return r.Runtime.Name
}

// catalog is a run's time without its bring-up.
func catalog(r *report.Report) float64 { return r.DurationSeconds - r.Runtime.BringUpSeconds }

// slowFamilies is the time of a run's sustained and storm scenarios
// (labels fault:storm, fault:sustained).
func slowFamilies(r *report.Report) float64 {
	t := 0.0
	for _, s := range r.Scenarios {
		if s.Has(report.LabelStorm) || s.Has(report.LabelSustained) {
			t += s.DurationSeconds
		}
	}
	return t
}

// summary is the table docs/performance.md quotes: per runtime from the serial
// matrix (nothing else competes for the cores there) and, beside it, the
// same run's time when the runtimes ran side by side; then both walls.
func summary(runs []matrixRun) string {
	var b strings.Builder
	serial, side := runs[0], runs[len(runs)-1]
	sideByName := map[string]*report.Report{}
	for _, r := range side.reports {
		sideByName[name(r)] = r
	}
	fmt.Fprintf(&b, "%-16s %9s %9s %16s %9s %15s\n", "runtime", "bring-up", "catalog", "storm+sustained", "run", "run side by side")
	slowest, slowestName := 0.0, ""
	slowestBase, slowestBaseName := 0.0, ""
	for _, r := range slices.SortedFunc(slices.Values(serial.reports), func(a, b *report.Report) int { return strings.Compare(name(a), name(b)) }) {
		n := name(r)
		sideRun := "-"
		if s, ok := sideByName[n]; ok {
			sideRun = fmt.Sprintf("%.1fs", s.DurationSeconds)
		}
		fmt.Fprintf(&b, "%-16s %8.1fs %8.1fs %15.1fs %8.1fs %15s\n", n, r.Runtime.BringUpSeconds, catalog(r), slowFamilies(r), r.DurationSeconds, sideRun)
		if r.Runtime.Name == "containerd" && catalog(r) > slowest {
			slowest, slowestName = catalog(r), n
		}
		if base := catalog(r) - slowFamilies(r); r.Runtime.Name == "containerd" && base > slowestBase {
			slowestBase, slowestBaseName = base, n
		}
	}
	for _, m := range runs {
		fmt.Fprintf(&b, "matrix %-13s %d runtimes, %d at once: %s wall\n", m.name, len(m.reports), m.jobs, m.wall.Round(time.Second))
	}
	if slowestName != "" {
		fmt.Fprintf(&b, "target: a containerd catalog without storm and sustained <= %s: slowest %s, %.1fs (%s)\n",
			catalogTarget, slowestBaseName, slowestBase, verdict(slowestBase <= catalogTarget.Seconds()))
		fmt.Fprintf(&b, "target: a containerd catalog <= %s: slowest %s, %.1fs (%s)\n", fullCatalogTarget, slowestName, slowest, verdict(slowest <= fullCatalogTarget.Seconds()))
	}
	fmt.Fprintf(&b, "target: the whole matrix <= %s wall: side by side %s (%s)\n", matrixTarget, side.wall.Round(time.Second), verdict(side.wall <= matrixTarget))
	return b.String()
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}
