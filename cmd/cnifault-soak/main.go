// Command cnifault-soak compares the reports of repeated runs (hack/soak.sh,
// make soak) and names every scenario whose verdict or leaked kinds changed
// between runs of one runtime.
//
//	cnifault-soak REPORT.json...
//
// Exit status: 0 every scenario had one outcome on its runtime, 1 some
// scenario's outcome changed, 2 a report could not be read.
package main

import (
	"fmt"
	"os"

	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(paths []string) int {
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "usage: cnifault-soak REPORT.json...")
		return report.ExitHarness
	}
	var reports []*report.Report
	for _, p := range paths {
		r, err := report.Read(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cnifault-soak: %v\n", err)
			return report.ExitHarness
		}
		reports = append(reports, r)
	}
	rs := verdict.Stability(reports)
	fmt.Print(verdict.StabilityText(rs))
	for _, r := range rs {
		if len(r.Unstable()) > 0 {
			return report.ExitFail
		}
	}
	return report.ExitPass
}
