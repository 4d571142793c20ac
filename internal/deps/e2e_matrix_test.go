package deps_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/crio"
	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/internal/testenv"
)

// The e2e workflow runs one job per managed runtime, with versions it reads
// from the tables hack/deps.sh builds from (hack/e2e-matrix.sh). These tests
// hold the three together without root or a runtime: well-formed tables, a
// matrix that is exactly the tables' lines (containerd's, then CRI-O's), and
// a workflow that takes its matrix from the script and repeats no version.

type runtimeLine struct {
	name, version string // containerd-1.7, v1.7.35
	line          int
}

var lineVersion = regexp.MustCompile(`^v(\d+\.\d+)\.\d+$`)

// families are the managed runtime tables, hack/<family>-lines.txt, in the
// order the matrix lists them.
var families = []string{"containerd", "crio"}

// cacheNames are each family's cache dir of a tag's build, as the
// harness looks for it: hack/lines.sh names the dir hack/deps.sh builds
// into (and CI caches) the same way, with the same build recipe.
var cacheNames = map[string]func(string) string{"containerd": containerd.CacheName, "crio": crio.CacheName}

// tableLines reads hack/<family>-lines.txt, failing the test on any row
// that is not `<family>-<major>.<minor> v<major>.<minor>.<patch>` of one
// line: every managed runtime is built from its module, none is a
// distribution's package.
func tableLines(t *testing.T, family string) []runtimeLine {
	t.Helper()
	table := "hack/" + family + "-lines.txt"
	lineName := regexp.MustCompile(`^` + family + `-(\d+\.\d+)$`)
	f, err := os.Open(filepath.Join(testenv.RepoRoot(t), table))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []runtimeLine
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			t.Errorf("%s:%d: %q: want two columns, <name> <version>", table, n, text)
			continue
		}
		name, version := fields[0], fields[1]
		m := lineName.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s:%d: name %q is not %s-<major>.<minor>", table, n, name, family)
			continue
		}
		if v := lineVersion.FindStringSubmatch(version); v == nil || v[1] != m[1] {
			t.Errorf("%s:%d: %s's version %q is not v%s.<patch>", table, n, name, version, m[1])
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("%s:%d: %s is listed again (first at line %d)", table, n, name, prev)
		}
		seen[name] = n
		lines = append(lines, runtimeLine{name, version, n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatalf("%s lists no line", table)
	}
	return lines
}

func TestRuntimeTablesAreWellFormed(t *testing.T) {
	for _, f := range families {
		tableLines(t, f)
	}
}

// matrixEntry is one job of the e2e matrix, as hack/e2e-matrix.sh prints it.
type matrixEntry struct {
	Runtime string `json:"runtime"`
	Version string `json:"version"`
	Cache   string `json:"cache"`
}

// e2eMatrix runs hack/e2e-matrix.sh in root and returns its outputs.
func e2eMatrix(root string) (map[string]string, error) {
	out, err := exec.Command("bash", filepath.Join(root, "hack", "e2e-matrix.sh")).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("hack/e2e-matrix.sh: %v: %s", err, stderr)
	}
	outputs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("hack/e2e-matrix.sh printed %q, not a name=value output", line)
		}
		outputs[k] = v
	}
	return outputs, nil
}

// The matrix is every line of the tables, containerd's and then CRI-O's,
// each in its order, with the version it is built at; each built runtime is
// cached in the dir hack/deps.sh names by family, version and build recipe,
// where the harness looks for it.
func TestE2EMatrixIsEveryManagedRuntime(t *testing.T) {
	root := testenv.RepoRoot(t)
	outputs, err := e2eMatrix(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []matrixEntry
	if err := json.Unmarshal([]byte(outputs["include"]), &got); err != nil {
		t.Fatalf("include=%s: %v", outputs["include"], err)
	}
	var want []matrixEntry
	for _, family := range families {
		for _, l := range tableLines(t, family) {
			want = append(want, matrixEntry{Runtime: l.name, Version: l.version, Cache: cacheNames[family](l.version)})
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("hack/e2e-matrix.sh's matrix is\n  %+v\nwant\n  %+v", got, want)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(outputs["cni-plugins"]) {
		t.Errorf("hack/e2e-matrix.sh: cni-plugins=%q, want go.mod's plugins version", outputs["cni-plugins"])
	}
	if outputs["runc"] != daemon.RuncVersion {
		t.Errorf("hack/e2e-matrix.sh: runc=%q, want the pinned %s", outputs["runc"], daemon.RuncVersion)
	}
}

// A bad row stops the script, naming its line, before any job is started
// with a name or version that hack/deps.sh would refuse.
func TestE2EMatrixRejectsABadRow(t *testing.T) {
	root := testenv.RepoRoot(t)
	scripts := map[string][]byte{}
	for _, f := range []string{"e2e-matrix.sh", "lines.sh", "programs.txt"} {
		var err error
		if scripts[f], err = os.ReadFile(filepath.Join(root, "hack", f)); err != nil {
			t.Fatal(err)
		}
	}
	good := map[string]string{"containerd": "containerd-1.6 v1.6.38\n", "crio": "crio-1.34 v1.34.0\n"}
	for _, c := range []struct{ family, row string }{
		{"containerd", "containerd-1.7"},             // no version
		{"containerd", "containerd-1.7 v1.8.0"},      // another line's release
		{"containerd", "containerd-1.7 1.7.35"},      // no v
		{"containerd", "containerd-17 v1.7.35"},      // not <major>.<minor>
		{"containerd", "crio-1.34 v1.34.0"},          // not a containerd line
		{"containerd", "containerd-1.7 v1.7.35 old"}, // a third column
		{"containerd", "containerd-1.6 v1.6.38"},     // listed twice
		{"containerd", "containerd-1.7 apt"},         // no line is a distribution's package
		{"crio", "crio-1.35 apt"},                    // CRI-O is never a package
		{"crio", "crio-1.35 v1.36.3"},                // another line's release
		{"crio", "containerd-1.7 v1.7.35"},           // not a CRI-O line
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "hack"), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, b := range scripts {
			if err := os.WriteFile(filepath.Join(dir, "hack", f), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, family := range families {
			table := "# c\n" + good[family]
			if family == c.family {
				table += c.row + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, "hack", family+"-lines.txt"), []byte(table), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := c.family + "-lines.txt:3"
		if _, err := e2eMatrix(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hack/e2e-matrix.sh with %s row %q: %v, want an error naming %s", c.family, c.row, err, want)
		}
	}
}

type workflowStep struct {
	ID              string            `yaml:"id"`
	If              string            `yaml:"if"`
	Uses            string            `yaml:"uses"`
	Run             string            `yaml:"run"`
	With            map[string]any    `yaml:"with"`
	Env             map[string]string `yaml:"env"`
	ContinueOnError any               `yaml:"continue-on-error"`
}

type workflowJob struct {
	Needs           any               `yaml:"needs"` // a job id or a list of them
	ContinueOnError any               `yaml:"continue-on-error"`
	If              string            `yaml:"if"`
	Outputs         map[string]string `yaml:"outputs"`
	Strategy        struct {
		Matrix map[string]any `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []workflowStep `yaml:"steps"`
}

func (j workflowJob) needs() []string {
	switch n := j.Needs.(type) {
	case string:
		return []string{n}
	case []any:
		var ids []string
		for _, id := range n {
			ids = append(ids, fmt.Sprint(id))
		}
		return ids
	}
	return nil
}

// The e2e workflow's matrix is hack/e2e-matrix.sh's output, never a list of
// its own: no managed runtime's name or version is written in it, each
// build is cached under its own key, and a final job assembles every
// report into the verdict matrix.
func TestE2EWorkflowTakesItsMatrixFromTheTable(t *testing.T) {
	root := testenv.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "e2e.yml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var wf struct {
		Jobs map[string]workflowJob `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}

	for _, name := range regexp.MustCompile(`\b(?:containerd|crio)-v?\d+\.\d+`).FindAllString(text, -1) {
		t.Errorf("e2e.yml names %s: the runtimes and versions belong in hack/containerd-lines.txt and hack/crio-lines.txt", name)
	}
	versions := map[string]string{} // version without v -> where it belongs
	for _, family := range families {
		for _, l := range tableLines(t, family) {
			versions[strings.TrimPrefix(l.version, "v")] = "hack/" + family + "-lines.txt"
		}
	}
	versions[strings.TrimPrefix(daemon.RuncVersion, "v")] = "hack/programs.txt (runc)"
	for v, home := range versions {
		if strings.Contains(text, v) {
			t.Errorf("e2e.yml writes the version %s: it belongs in %s only", v, home)
		}
	}

	// The e2e job's matrix is the output of a job it needs that runs the
	// script into $GITHUB_OUTPUT.
	e2e, ok := wf.Jobs["e2e"]
	if !ok {
		t.Fatal("e2e.yml has no e2e job")
	}
	include := regexp.MustCompile(`^\$\{\{\s*fromJSON\(needs\.([\w-]+)\.outputs\.([\w-]+)\)\s*\}\}$`).
		FindStringSubmatch(fmt.Sprint(e2e.Strategy.Matrix["include"]))
	if include == nil || len(e2e.Strategy.Matrix) != 1 {
		t.Fatalf("e2e's matrix is %v, want only include: ${{ fromJSON(needs.<job>.outputs.<output>) }}", e2e.Strategy.Matrix)
	}
	if !slices.Contains(e2e.needs(), include[1]) {
		t.Errorf("e2e's matrix comes from job %s, which it does not need", include[1])
	}
	source := wf.Jobs[include[1]]
	step := regexp.MustCompile(`^\$\{\{\s*steps\.([\w-]+)\.outputs\.` + regexp.QuoteMeta(include[2]) + `\s*\}\}$`).
		FindStringSubmatch(source.Outputs[include[2]])
	if step == nil {
		t.Fatalf("job %s's output %s is %q, want a step's output of that name", include[1], include[2], source.Outputs[include[2]])
	}
	found := false
	for _, s := range source.Steps {
		if s.ID == step[1] {
			found = strings.Contains(s.Run, "hack/e2e-matrix.sh") && strings.Contains(s.Run, "$GITHUB_OUTPUT")
		}
	}
	if !found {
		t.Errorf("job %s's step %s does not write hack/e2e-matrix.sh's output to $GITHUB_OUTPUT", include[1], step[1])
	}

	// Every build is cached on its own, keyed by what names its dir (its
	// version), in the runner user's ~/.cache/cnifault, which is root's
	// only because sudo keeps HOME.
	restored := map[string]bool{}
	for _, s := range e2e.Steps {
		if strings.Contains(s.Run, "sudo") && !regexp.MustCompile(`--preserve-env=\S*\bHOME\b`).MatchString(s.Run) {
			t.Errorf("e2e step %q runs sudo without keeping HOME: its builds would miss the cached ~/.cache/cnifault", s.Run)
		}
		if !strings.HasPrefix(s.Uses, "actions/cache") {
			continue
		}
		path, key := fmt.Sprint(s.With["path"]), fmt.Sprint(s.With["key"])
		dir, ok := strings.CutPrefix(path, "~/.cache/cnifault/")
		if !ok || dir == "" || strings.Contains(dir, "\n") {
			t.Errorf("e2e caches %q: want one build's dir under ~/.cache/cnifault/", path)
			continue
		}
		if strings.HasPrefix(s.Uses, "actions/cache/save@") {
			if !restored[path] {
				t.Errorf("e2e saves %s, which no step before restores", path)
			}
			continue
		}
		if !strings.Contains(key, dir) {
			t.Errorf("e2e caches %s under key %q, which does not name the dir's version", path, key)
		}
		restored[path] = true
	}
	if len(restored) < 3 {
		t.Errorf("e2e restores %d builds, want the runtime's, the pinned runc's and the CNI plugins'", len(restored))
	}

	// The verdict matrix is assembled from every report, also when some
	// runtime failed.
	assembled := false
	for _, j := range wf.Jobs {
		if !slices.Contains(j.needs(), "e2e") || !strings.Contains(j.If, "always()") {
			continue
		}
		for _, s := range j.Steps {
			assembled = assembled || strings.Contains(s.Run, "cnifault compare")
		}
	}
	if !assembled {
		t.Error("no job that needs e2e with if: always() runs cnifault compare")
	}
}

// Each e2e job runs what `make test` pins, the way a node runs it: `make
// deps` for its runtime (the pinned builds; no distribution runtime is
// installed by the workflow itself), then hack/gate.sh, make e2e's gate,
// under hack/known-failures.yaml, the file the self-validation pins every
// managed runtime's verdicts from; nothing lets the gate's status pass
// unread, and nothing in the workflow is particular to one distribution.
func TestE2EWorkflowRunsTheGateMakeTestPins(t *testing.T) {
	root := testenv.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "e2e.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]workflowJob `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)debian|ubuntu-only|apt-get|apt install`).FindString(string(raw)); m != "" {
		t.Errorf("e2e.yml says %q: the managed set is built from pinned modules on any distribution, and make deps installs the rest", m)
	}
	e2e := wf.Jobs["e2e"]
	if e2e.ContinueOnError != nil {
		t.Errorf("the e2e job sets continue-on-error: %v", e2e.ContinueOnError)
	}
	deps, gate := -1, -1
	for i, s := range e2e.Steps {
		if s.ContinueOnError != nil {
			t.Errorf("e2e step %q sets continue-on-error: %v", s.Run+s.Uses, s.ContinueOnError)
		}
		run := s.Run
		for k, v := range s.Env {
			run = strings.ReplaceAll(run, "$"+k, v)
		}
		if regexp.MustCompile(`\bmake deps RUNTIME="?\$\{\{ matrix\.runtime \}\}"?`).MatchString(run) {
			deps = i
		}
		if strings.Contains(run, "hack/gate.sh") {
			gate = i
			if !regexp.MustCompile(`\bKNOWN_FAILURES=hack/known-failures\.yaml\b`).MatchString(run) ||
				!regexp.MustCompile(`\bRUNTIME="?\$\{\{ matrix\.runtime \}\}"?`).MatchString(run) ||
				!regexp.MustCompile(`\bREQUIRE_COVERAGE=1\b`).MatchString(run) {
				t.Errorf("e2e runs %q: want hack/gate.sh on the job's runtime with KNOWN_FAILURES=hack/known-failures.yaml and REQUIRE_COVERAGE=1", s.Run)
			}
			if s.If != "" {
				t.Errorf("the gate step runs only if %s", s.If)
			}
		}
	}
	if deps < 0 || gate < 0 || deps > gate {
		t.Errorf("e2e's steps: make deps for the job's runtime at %d, hack/gate.sh at %d: want both, deps first", deps, gate)
	}
	raw, err = os.ReadFile(filepath.Join(root, "suites", "selfvalidation", "verdicts_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"../../hack/known-failures.yaml"`) {
		t.Error("the self-validation no longer pins its verdicts from hack/known-failures.yaml: the gate's expectations would not be make test's")
	}
}
