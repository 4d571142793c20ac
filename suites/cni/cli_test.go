package cni_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// The suite compiled with `go test -c` is the cnifault binary, as critest
// is: a first argument naming a command runs that command instead of the
// suite. Everything else is a run, with Ginkgo's flags passed through.
func runCommand(args []string, stdout, stderr io.Writer) (handled bool, code int) {
	if len(args) == 0 {
		return false, 0
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return true, 0
	case "compare":
		return true, compare(args[1:], stdout, stderr)
	case "restore":
		return true, restore(args[1:], stdout, stderr)
	}
	return false, 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `cnifault: CNI fault-injection conformance for container runtimes.

Usage:
  cnifault [flags] [ginkgo flags]     run the catalog and write the reports
  cnifault list                       the scenarios: id, labels, what each injects
  cnifault compare [--html FILE] [--readme FILE] A/report.json B/report.json ...
                                      the scenario x runtime matrix (Markdown on stdout)
  cnifault restore --work-dir DIR     undo what an external-mode run killed outright
                                      (SIGKILL) left on the node, from its record in DIR
  cnifault help                       this text

Exit status: 0 every scenario passed, 1 a scenario failed, 2 the harness could not run.

Flags of a run:
`)
	flag.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "test.") || strings.HasPrefix(f.Name, "ginkgo.") {
			return
		}
		def := ""
		if f.DefValue != "" {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s\n        %s%s\n", f.Name, f.Usage, def)
	})
	fmt.Fprint(w, `
Ginkgo's flags pass through, for example:
  --ginkgo.label-filter='fault:partial || control'   run a subset by label
  --ginkgo.focus=hang                                run scenarios whose text matches
  --ginkgo.v                                         narrate every step
`)
}

// previewing is set while Ginkgo walks the spec tree without running it:
// the reporting nodes then have nothing to report.
var previewing bool

// previewCatalog walks the spec tree without running anything (Ginkgo's
// preview) and returns the catalog: every scenario with its labels.
func previewCatalog() []report.Scenario {
	previewing = true
	defer func() { previewing = false }()
	var out []report.Scenario
	for _, s := range PreviewSpecs("cnifault").SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		id := labelID(s.Labels())
		if id == "" {
			continue
		}
		labels[id] = otherLabels(s.Labels())
		out = append(out, report.Scenario{ID: id, Description: strings.TrimPrefix(s.ContainerHierarchyTexts[len(s.ContainerHierarchyTexts)-1], "when ")})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// labels are each scenario's labels other than its id, for `cnifault list`.
var labels = map[string][]string{}

// printList writes the catalog.
func printList(w io.Writer, catalog []report.Scenario) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tLABELS\tINJECTS")
	for _, s := range catalog {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.ID, strings.Join(labels[s.ID], ","), s.Description)
	}
	tw.Flush()
}

// compare renders several reports side by side.
func compare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	html := fs.String("html", "", "also write the matrix as a self-contained HTML file")
	readme := fs.String("readme", "", "replace the verdict matrix section of this Markdown file")
	if err := fs.Parse(args); err != nil {
		return report.ExitHarness
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "compare: give one or more report.json files")
		return report.ExitHarness
	}
	var reports []*report.Report
	for _, p := range fs.Args() {
		r, err := report.Read(p)
		if err != nil {
			fmt.Fprintln(stderr, "compare:", err)
			return report.ExitHarness
		}
		reports = append(reports, r)
	}
	fmt.Fprint(stdout, report.CompareMarkdown(reports))
	if *html != "" {
		if err := os.WriteFile(*html, []byte(report.CompareHTML(reports)), 0o644); err != nil {
			fmt.Fprintln(stderr, "compare:", err)
			return report.ExitHarness
		}
	}
	if *readme != "" {
		if err := replaceMatrix(*readme, report.Matrix(reports)); err != nil {
			fmt.Fprintln(stderr, "compare:", err)
			return report.ExitHarness
		}
	}
	return report.ExitPass
}

// restore undoes a killed external-mode run from the record in its work
// dir (or every record under a work root): the conf dir's files, the fault
// plugin, the run's pods, links and cgroups.
func restore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("work-dir", "", "the killed run's work dir (as preflight names it), or a work root holding several")
	if err := fs.Parse(args); err != nil {
		return report.ExitHarness
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "restore: give --work-dir DIR and nothing else")
		return report.ExitHarness
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := runtimes.RestoreExternal(ctx, *dir, stdout); err != nil {
		fmt.Fprintln(stderr, "restore:", err)
		return report.ExitHarness
	}
	return report.ExitPass
}

// The README's generated section.
const (
	matrixBegin = "<!-- verdicts:begin (generated by make verdict-table; do not edit) -->"
	matrixEnd   = "<!-- verdicts:end -->"
)

func replaceMatrix(path, matrix string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(raw)
	i, j := strings.Index(text, matrixBegin), strings.Index(text, matrixEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q section", path, matrixBegin, matrixEnd)
	}
	return os.WriteFile(path, []byte(text[:i]+matrixBegin+"\n"+matrix+text[j:]), 0o644)
}
