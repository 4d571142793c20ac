package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ginkgoReport is what the bench reads of Ginkgo's JSON report (a list of
// types.Report; read by field name, since only suites/ may import Ginkgo):
// the suite's time and each spec's texts, labels, node type and time
// (nanoseconds, as time.Duration encodes).
type ginkgoReport struct {
	RunTime     time.Duration
	SpecReports []specReport
}

// specReport is one spec of Ginkgo's JSON report: its texts, labels, node
// type and time, and how it ended (State, Failure) for the failures digest.
type specReport struct {
	ContainerHierarchyTexts  []string
	ContainerHierarchyLabels [][]string
	LeafNodeType             string
	LeafNodeText             string
	LeafNodeLabels           []string
	RunTime                  time.Duration
	State                    string
	Failure                  struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

// text is the spec's full text, its containers' and its own.
func (s specReport) text() string {
	return strings.TrimSpace(strings.Join(append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText), " "))
}

// decorators are the labels Ginkgo adds for a decorator, not a check.
var decorators = []string{"Serial", "Ordered"}

// selfValidationRecord is where `make selfvalidate` has Ginkgo write its
// JSON report (the Makefile's SELFVALIDATION_REPORT): the spec by spec
// time of the longest part of make test.
const selfValidationRecord = "_output/selfvalidation.json"

// specTime is one self-validation spec's time: a BeforeAll's (a catalog
// run, the matrix) counts in the first spec after it, as Ginkgo reports it.
type specTime struct {
	text   string
	labels []string
	d      time.Duration
}

// svTimes is the self-validation's time, whole and by spec.
type svTimes struct {
	total time.Duration
	specs []specTime
}

func readSelfValidation(path string) *svTimes {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var reports []ginkgoReport
	if json.Unmarshal(raw, &reports) != nil || len(reports) == 0 {
		return nil
	}
	var t svTimes
	for _, r := range reports {
		t.total += r.RunTime
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" || s.RunTime == 0 {
				continue
			}
			var labels []string
			for _, ls := range append(slices.Clone(s.ContainerHierarchyLabels), s.LeafNodeLabels) {
				for _, l := range ls {
					if !slices.Contains(labels, l) && !slices.Contains(decorators, l) {
						labels = append(labels, l)
					}
				}
			}
			t.specs = append(t.specs, specTime{text: s.text(), labels: labels, d: s.RunTime})
		}
	}
	return &t
}

// testBreakdown says where make test's time went, for the target: what
// came before the self-validation (deps, build, image, vet, unit tests) and
// the self-validation by label, a spec counted under each of its labels
// (the labels say which check a spec is: the per-runtime catalogs, the
// slow node, the parallel agreement, …), and its longest specs.
func testBreakdown(total time.Duration, sv *svTimes, longest int) string {
	if sv == nil {
		return fmt.Sprintf("  where make test's time went: no self-validation report in %s (make selfvalidate writes it)\n", selfValidationRecord)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "  where make test's time went: before the self-validation (deps, build, image, vet, unit tests) %s; the self-validation %s\n",
		(total - sv.total).Round(time.Second), sv.total.Round(time.Second))
	byLabel := map[string]time.Duration{}
	for _, s := range sv.specs {
		if len(s.labels) == 0 {
			byLabel["(no label)"] += s.d
		}
		for _, l := range s.labels {
			byLabel[l] += s.d
		}
	}
	labels := make([]string, 0, len(byLabel))
	for l := range byLabel {
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b string) int {
		if c := cmp.Compare(byLabel[b], byLabel[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	w.WriteString("  the self-validation by label:")
	for _, l := range labels {
		fmt.Fprintf(&w, " %s %s;", l, byLabel[l].Round(time.Second))
	}
	w.WriteString("\n")
	specs := slices.Clone(sv.specs)
	slices.SortStableFunc(specs, func(a, b specTime) int { return cmp.Compare(b.d, a.d) })
	for _, s := range specs[:min(longest, len(specs))] {
		fmt.Fprintf(&w, "  %8s  %s [%s]\n", s.d.Round(time.Second), s.text, strings.Join(s.labels, ", "))
	}
	return w.String()
}
