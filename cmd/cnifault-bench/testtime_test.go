package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// make test's time is told apart from Ginkgo's own JSON report: what came
// before the self-validation, the self-validation by label (a spec under
// each of its labels), and its longest specs first.
func TestMakeTestsTimeIsBrokenDownFromTheSelfValidationsReport(t *testing.T) {
	// The shape of Ginkgo v2's JSON report (a list of suite reports), as
	// -ginkgo.json-report writes it: field names, node types and labels as
	// a dry run of the self-validation wrote them.
	spec := func(container, leaf string, d time.Duration, labels ...string) map[string]any {
		return map[string]any{"ContainerHierarchyTexts": []string{container}, "ContainerHierarchyLabels": [][]string{{"Serial"}},
			"LeafNodeType": "It", "LeafNodeText": leaf, "LeafNodeLabels": labels, "State": "passed", "RunTime": d}
	}
	report := []map[string]any{{"SuiteDescription": "cnifault self-validation", "RunTime": 25 * time.Minute, "SpecReports": []map[string]any{
		spec("cnifault on containerd-2.4", "gives add-error the verdict pass", 150*time.Second, "containerd-2.4"),
		spec("cnifault on a slow node", "gives crio-1.36's catalog its idle verdicts", 400*time.Second, "slow-node"),
		spec("cnifault run in one process", "agrees with parallel processes", 200*time.Second, "parallel"),
		spec("cnifault", "finds docs up to date", 0, "docs"),
		{"LeafNodeType": "BeforeSuite", "RunTime": time.Minute},
	}}}
	path := writeReport(t, report)
	sv := readSelfValidation(path)
	if sv == nil || len(sv.specs) != 3 {
		t.Fatalf("the report's specs with a time read as %+v, want 3", sv)
	}
	got := testBreakdown(31*time.Minute, sv, 2)
	mustContain(t, "the breakdown", got,
		"before the self-validation (deps, build, image, vet, unit tests) 6m0s; the self-validation 25m0s",
		"by label: slow-node 6m40s; parallel 3m20s; containerd-2.4 2m30s;",
		"   6m40s  cnifault on a slow node gives crio-1.36's catalog its idle verdicts [slow-node]\n     3m20s  cnifault run in one process",
	)
	if strings.Contains(got, "containerd-2.4 gives add-error") {
		t.Errorf("the breakdown lists more than the 2 longest specs:\n%s", got)
	}
	if got := testBreakdown(31*time.Minute, readSelfValidation(filepath.Join(t.TempDir(), "none.json")), 2); !strings.Contains(got, "no self-validation report") {
		t.Errorf("without a report: %q", got)
	}
}

// A failed make test ends with what each failed spec said, from the same
// report: Ginkgo's summary names them only.
func TestTheFailuresDigestQuotesEachFailedSpecsMessage(t *testing.T) {
	failed := func(leaf, msg string) map[string]any {
		return map[string]any{"ContainerHierarchyTexts": []string{"cnifault on containerd-2.3"}, "LeafNodeType": "It", "LeafNodeText": leaf,
			"State": "failed", "Failure": map[string]any{"Message": msg, "Location": map[string]any{"FileName": "/x/verdicts_test.go", "LineNumber": 203}}}
	}
	long := strings.Repeat("line\n", 40)
	report := []map[string]any{{"SpecReports": []map[string]any{
		{"LeafNodeType": "It", "LeafNodeText": "passes", "State": "passed"},
		failed("gives storm-partial-add-del-fails the verdict pass", "on containerd-2.3: storm-partial-add-del-fails: verdict fail, want pass\n"+long),
	}}}
	path := writeReport(t, report)
	var w strings.Builder
	if !failuresDigest(&w, path) {
		t.Fatalf("the digest did not read the report: %s", w.String())
	}
	got := w.String()
	mustContain(t, "the digest", got,
		"failed specs (1)",
		"[failed] cnifault on containerd-2.3 gives storm-partial-add-del-fails the verdict pass (/x/verdicts_test.go:203)\n    on containerd-2.3: storm-partial-add-del-fails: verdict fail, want pass\n",
		"… 29 more lines",
	)
	if strings.Contains(got, "passes") {
		t.Errorf("the digest quotes a passed spec:\n%s", got)
	}
	if failuresDigest(&w, filepath.Join(t.TempDir(), "none.json")) {
		t.Error("the digest found a report that is not there")
	}
}

// writeReport writes v as a self-validation JSON report in a temp dir, and
// returns its path.
func writeReport(t *testing.T, v any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "selfvalidation.json")
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
