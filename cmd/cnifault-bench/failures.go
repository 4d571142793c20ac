package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// digestLines bounds each failure's message in the digest: Gomega's first
// lines name what differed; the rest (a whole report, a stack) is in the
// run's junit.xml.
const digestLines = 12

// digestSpecs bounds how many failed specs the digest quotes: one cause
// fails several specs (a verdict, the gate, the verdict table), and its
// first ones say it.
const digestSpecs = 8

// failuresDigest writes what each failed spec of the self-validation's
// JSON report said: CI keeps only the tail of make test's output, where
// Ginkgo's summary names the failed specs but not their messages, and a
// failure that happens once in many runs must be explained from that one
// run's output. It reports whether it found the record.
func failuresDigest(w io.Writer, path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(w, "no self-validation report at %s: %v\n", path, err)
		return false
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(raw, &reports); err != nil {
		fmt.Fprintf(w, "%s: %v\n", path, err)
		return false
	}
	var failed []specReport
	for _, r := range reports {
		for _, s := range r.SpecReports {
			switch s.State {
			case "failed", "panicked", "timedout", "interrupted", "aborted":
				failed = append(failed, s)
			}
		}
	}
	fmt.Fprintf(w, "the self-validation's failed specs (%d), as they failed:\n", len(failed))
	for i, s := range failed {
		if i == digestSpecs {
			fmt.Fprintf(w, "… and %d more (the run's junit.xml has them all)\n", len(failed)-i)
			break
		}
		fmt.Fprintf(w, "[%s] %s (%s:%d)\n", s.State, s.text(), s.Failure.Location.FileName, s.Failure.Location.LineNumber)
		lines := strings.Split(strings.TrimRight(s.Failure.Message, "\n"), "\n")
		for j, l := range lines {
			if j == digestLines {
				fmt.Fprintf(w, "    … %d more lines\n", len(lines)-j)
				break
			}
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	return true
}
