package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// The targets (issue 33): ratios to what this machine can physically do,
// so that they stay true as the catalog grows, and two walls.
const (
	// ratioTarget: a parallel catalog against the same runtime's catalog
	// in one process.
	ratioTarget = 0.55
	// floorTarget: a parallel catalog against its floor.
	floorTarget = 1.5
	// matrixTarget: the ten managed runtimes' parallel catalogs side by
	// side.
	matrixTarget = 6 * time.Minute
	// testTarget: make test with every build cached (.ci/run).
	testTarget = 15 * time.Minute
)

// floor is the least time a parallel catalog can take on this machine:
// the longer of its longest scenario (which one process runs start to end)
// and its CPU time spread over every core. Both come from the catalog in
// one process, where nothing competes with a scenario for the cores.
type floor struct {
	longest   float64
	longestID string
	cpu       float64 // seconds
	cores     int
}

func (f floor) seconds() float64 { return max(f.longest, f.cpu/float64(f.cores)) }

func (f floor) String() string {
	return fmt.Sprintf("%.1fs (longest %s %.1fs; CPU %.1fs / %d cores = %.1fs)", f.seconds(), f.longestID, f.longest, f.cpu, f.cores, f.cpu/float64(f.cores))
}

func floorOf(serial catalogRun, cores int) floor {
	f := floor{cpu: serial.cpu.Seconds(), cores: cores}
	if serial.rep != nil {
		for _, s := range serial.rep.Scenarios {
			if s.DurationSeconds > f.longest {
				f.longest, f.longestID = s.DurationSeconds, s.ID
			}
		}
	}
	return f
}

// summary is what make bench prints: every figure, the targets judged, and
// where the time of a missed one went.
func (b *bench) summary() string {
	var w strings.Builder
	fmt.Fprintf(&w, "load average at the start %s, at the end %s; %d cores\n\n", b.load0, b.load1, b.cores)
	fmt.Fprintf(&w, "%-16s %9s %10s %9s %6s %10s %9s %6s %8s %7s  %s\n",
		"runtime", "bring-up", "1 process", "CPU", "procs", "parallel", "CPU", "ratio", "floor", "×floor", "verdicts")
	var ratios, floors []judged
	var missed []pair
	for _, p := range b.catalogs {
		if p.serial.rep == nil || p.parallel.rep == nil {
			fmt.Fprintf(&w, "%-16s no report (see the log above)\n", p.runtime)
			continue
		}
		f := floorOf(p.serial, b.cores)
		ratio := p.parallel.wall.Seconds() / p.serial.wall.Seconds()
		xf := p.parallel.wall.Seconds() / f.seconds()
		fmt.Fprintf(&w, "%-16s %8.1fs %9.1fs %8.1fs %6d %9.1fs %8.1fs %6.2f %7.1fs %7.2f  %s\n",
			p.runtime, p.parallel.rep.Runtime.BringUpSeconds, p.serial.wall.Seconds(), p.serial.cpu.Seconds(),
			p.parallel.processes(), p.parallel.wall.Seconds(), p.parallel.cpu.Seconds(), ratio, f.seconds(), xf,
			agreement(p.serial.rep, p.parallel.rep))
		ratios = append(ratios, judged{p.runtime, family(p.serial.rep), ratio})
		floors = append(floors, judged{p.runtime, family(p.serial.rep), xf})
		if ratio > ratioTarget || xf > floorTarget {
			missed = append(missed, p)
		}
	}
	for _, p := range b.catalogs {
		if p.serial.rep != nil {
			fmt.Fprintf(&w, "floor %-16s %s\n", p.runtime, floorOf(p.serial, b.cores))
		}
	}
	for _, s := range b.sweeps {
		w.WriteString(s.line())
	}
	if m := b.matrixRun; m != nil {
		fmt.Fprintf(&w, "matrix: %d runtimes, parallel catalogs, %d at once: %s wall; CPU %s (over %d cores: %s)\n",
			len(m.reports), m.jobs, m.wall.Round(time.Second), m.cpu.Round(time.Second), b.cores, (m.cpu / time.Duration(b.cores)).Round(time.Second))
	}
	if t := b.test; t != nil {
		fmt.Fprintf(&w, "make test (.ci/run's record, %s at %s, load average %s): %s, exit status %d",
			t.Finished, t.Commit, t.Load, (time.Duration(t.Seconds) * time.Second).Round(time.Second), t.Exit)
		if f := t.floor(); f > 0 {
			fmt.Fprintf(&w, "; CPU %s (over %d cores: %s)", (time.Duration(t.CPU) * time.Second).Round(time.Second), t.Cores, f.Round(time.Second))
		}
		w.WriteString("\n")
	}
	w.WriteString("\n")
	for _, fam := range []string{"containerd", "cri-o"} {
		if j, ok := worst(ratios, fam); ok {
			fmt.Fprintf(&w, "target: a parallel %s catalog <= %.2f× its time in one process: worst %s %.2f (%s)\n", fam, ratioTarget, j.runtime, j.value, met(j.value <= ratioTarget))
		}
		if j, ok := worst(floors, fam); ok {
			fmt.Fprintf(&w, "target: a parallel %s catalog <= %.1f× its floor: worst %s %.2f (%s)\n", fam, floorTarget, j.runtime, j.value, met(j.value <= floorTarget))
		}
	}
	if m := b.matrixRun; m != nil {
		fmt.Fprintf(&w, "target: the matrix of parallel catalogs <= %s: %s (%s)\n", matrixTarget, m.wall.Round(time.Second), met(m.wall <= matrixTarget))
		if m.wall > matrixTarget {
			fmt.Fprintf(&w, "  its CPU over the cores alone takes %s: %s\n", (m.cpu / time.Duration(b.cores)).Round(time.Second),
				met(m.cpu/time.Duration(b.cores) <= matrixTarget))
		}
	}
	if t := b.test; t != nil {
		d := time.Duration(t.Seconds) * time.Second
		fmt.Fprintf(&w, "target: make test <= %s: %s (%s)\n", testTarget, d.Round(time.Second), met(d <= testTarget))
		if d > testTarget {
			if f := t.floor(); f > 0 {
				fmt.Fprintf(&w, "  its CPU over the cores alone takes %s: %s\n", f.Round(time.Second), met(f <= testTarget))
			}
			w.WriteString(testBreakdown(d, b.selfValidation, 10))
		}
	} else {
		fmt.Fprintf(&w, "target: make test <= %s: no record in %s (run .ci/run)\n", testTarget, ciRunRecord)
	}
	w.WriteString(kubeletSummary(b.kubelet, b.selfValidation))
	for _, p := range missed {
		w.WriteString(breakdown(p, b.cores))
	}
	return w.String()
}

// judged is one runtime's figure against a target.
type judged struct {
	runtime, family string
	value           float64
}

func worst(js []judged, fam string) (judged, bool) {
	var out judged
	found := false
	for _, j := range js {
		if j.family == fam && (!found || j.value > out.value) {
			out, found = j, true
		}
	}
	return out, found
}

func family(r *report.Report) string { return r.Runtime.Name }

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// agreement holds a parallel run to the run in one process with the
// engine's one comparison (verdict.Disagreements: verdict and signature,
// both ways, a pinned race's sides agreeing): "same" where every scenario
// agrees and both exit alike, else what differs.
func agreement(one, par *report.Report) string {
	diffs := verdict.Disagreements(one, par, func(id string) verdict.Expectation {
		var labels []string
		if s := one.Scenario(id); s != nil {
			labels = s.Labels
		}
		return verdict.ExpectationOf(pins.Match(one.Runtime, id), labels)
	})
	if one.ExitStatus != par.ExitStatus {
		diffs = append(diffs, fmt.Sprintf("exit status %d became %d", one.ExitStatus, par.ExitStatus))
	}
	if len(diffs) == 0 {
		return "same"
	}
	return strings.Join(diffs, "; ")
}

// pins are the expectations the catalogs are gated by (main loads
// hack/known-failures.yaml): a race they pin may go either way in two
// runs.
var pins verdict.KnownFailures

// line is a sweep's catalog times by --procs, and the fastest that changed
// no verdict.
func (s sweepRun) line() string {
	var parts []string
	var serial *report.Report
	best, bestN := 0.0, 0
	for _, c := range s.runs {
		if c.rep == nil {
			parts = append(parts, fmt.Sprintf("%d: no report", c.processes()))
			continue
		}
		if c.processes() == 1 {
			serial = c.rep
		}
		same := serial != nil && agreement(serial, c.rep) == "same"
		mark := ""
		if !same {
			mark = " (verdicts differ: " + agreement(serial, c.rep) + ")"
		}
		parts = append(parts, fmt.Sprintf("%d: %.1fs%s", c.processes(), c.wall.Seconds(), mark))
		if same && (bestN == 0 || c.wall.Seconds() < best) {
			best, bestN = c.wall.Seconds(), c.processes()
		}
	}
	return fmt.Sprintf("%s by --procs: %s; fastest that changes no verdict: %d\n", s.runtime, strings.Join(parts, ", "), bestN)
}

// breakdown is where a parallel catalog's time went, for a missed target:
// its floor, its bring-up, and the process that ended last, scenario by
// scenario: each one's time in the parallel run against its time alone in
// one process (its own waits and CPU), the rest being the wait for a core
// beside the other processes' scenarios.
func breakdown(p pair, cores int) string {
	var w strings.Builder
	f := floorOf(p.serial, cores)
	par := p.parallel.rep
	fmt.Fprintf(&w, "\nwhere %s's parallel catalog (%.1fs, %d processes) went: floor %s; bring-up %.1fs; CPU %.1fs in parallel against %.1fs in one process\n",
		p.runtime, p.parallel.wall.Seconds(), p.parallel.processes(), f, par.Runtime.BringUpSeconds, p.parallel.cpu.Seconds(), p.serial.cpu.Seconds())
	load := map[int]float64{}
	for _, s := range par.Scenarios {
		if s.Process > 0 {
			load[s.Process] += s.DurationSeconds
		}
	}
	procs := make([]int, 0, len(load))
	for n := range load {
		procs = append(procs, n)
	}
	sort.Ints(procs)
	var loads []string
	last := 0
	for _, n := range procs {
		loads = append(loads, fmt.Sprintf("%d: %.1fs", n, load[n]))
		if last == 0 || load[n] > load[last] {
			last = n
		}
	}
	fmt.Fprintf(&w, "  the processes' scenarios: %s\n", strings.Join(loads, ", "))
	var ids []report.Scenario
	for _, s := range par.Scenarios {
		if s.Process == last {
			ids = append(ids, s)
		}
	}
	slices.SortFunc(ids, func(a, b report.Scenario) int { return int((b.DurationSeconds - a.DurationSeconds) * 1000) })
	alone, total := 0.0, 0.0
	for _, s := range ids {
		one := 0.0
		if o := p.serial.rep.Scenario(s.ID); o != nil {
			one = o.DurationSeconds
		}
		alone += one
		total += s.DurationSeconds
		fmt.Fprintf(&w, "  process %d  %-32s %6.1fs  alone %6.1fs  waiting for a core %6.1fs\n", last, s.ID, s.DurationSeconds, one, max(s.DurationSeconds-one, 0))
	}
	fmt.Fprintf(&w, "  process %d  %-32s %6.1fs  alone %6.1fs  waiting for a core %6.1fs\n", last, "(all)", total, alone, max(total-alone, 0))
	return w.String()
}
