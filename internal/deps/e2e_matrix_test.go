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

	"github.com/cnifault/cnifault/internal/testenv"
)

// The e2e workflow runs one job per managed runtime, with versions it reads
// from the tables hack/deps.sh builds from (hack/e2e-matrix.sh). These tests
// hold the three together without root or a runtime: a well-formed table, a
// matrix that is exactly the table plus CRI-O, and a workflow that takes its
// matrix from the script and repeats no version.

type containerdLine struct {
	name, version string // containerd-1.7, v1.7.35 or apt
	line          int
}

var (
	lineName    = regexp.MustCompile(`^containerd-(\d+\.\d+)$`)
	lineVersion = regexp.MustCompile(`^v(\d+\.\d+)\.\d+$`)
	// hack/build-crio.sh's default, the line hack/e2e-matrix.sh reads.
	crioVersion = regexp.MustCompile(`(?m)^CRIO_VERSION="\$\{CRIO_VERSION:-(v(\d+\.\d+)\.\d+)\}"$`)
)

// containerdLines reads hack/containerd-lines.txt, failing the test on any
// row that is not `containerd-<major>.<minor> <apt|v<major>.<minor>.<patch>>`
// of one line.
func containerdLines(t *testing.T) []containerdLine {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(t), "hack", "containerd-lines.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []containerdLine
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			t.Errorf("hack/containerd-lines.txt:%d: %q: want two columns, <name> <version-or-apt>", n, text)
			continue
		}
		name, version := fields[0], fields[1]
		m := lineName.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("hack/containerd-lines.txt:%d: name %q is not containerd-<major>.<minor>", n, name)
			continue
		}
		if v := lineVersion.FindStringSubmatch(version); version != "apt" && (v == nil || v[1] != m[1]) {
			t.Errorf("hack/containerd-lines.txt:%d: %s's version %q is neither apt nor v%s.<patch>", n, name, version, m[1])
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("hack/containerd-lines.txt:%d: %s is listed again (first at line %d)", n, name, prev)
		}
		seen[name] = n
		lines = append(lines, containerdLine{name, version, n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatal("hack/containerd-lines.txt lists no containerd line")
	}
	return lines
}

func TestContainerdLinesAreWellFormed(t *testing.T) {
	containerdLines(t)
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

// The matrix is every containerd line of the table, in its order, with the
// version it is built at, and then CRI-O at hack/build-crio.sh's version;
// each built runtime is cached in the dir hack/deps.sh names by version.
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
	for _, l := range containerdLines(t) {
		e := matrixEntry{Runtime: l.name, Version: l.version}
		if l.version != "apt" {
			e.Cache = "containerd-" + l.version
		}
		want = append(want, e)
	}
	crio, err := os.ReadFile(filepath.Join(root, "hack", "build-crio.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := crioVersion.FindSubmatch(crio)
	if m == nil {
		t.Fatalf("hack/build-crio.sh has no line matching %s, which hack/e2e-matrix.sh reads CRI-O's version from", crioVersion)
	}
	want = append(want, matrixEntry{Runtime: "crio-" + string(m[2]), Version: string(m[1]), Cache: "crio-" + string(m[1])})
	if !slices.Equal(got, want) {
		t.Errorf("hack/e2e-matrix.sh's matrix is\n  %+v\nwant\n  %+v", got, want)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(outputs["cni-plugins"]) {
		t.Errorf("hack/e2e-matrix.sh: cni-plugins=%q, want go.mod's plugins version", outputs["cni-plugins"])
	}
}

// A bad row stops the script, naming its line, before any job is started
// with a name or version that hack/deps.sh would refuse.
func TestE2EMatrixRejectsABadRow(t *testing.T) {
	root := testenv.RepoRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "hack", "e2e-matrix.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		"containerd-1.7",             // no version
		"containerd-1.7 v1.8.0",      // another line's release
		"containerd-1.7 1.7.35",      // no v
		"containerd-17 v1.7.35",      // not <major>.<minor>
		"crio-1.34 v1.34.0",          // not a containerd line
		"containerd-1.7 v1.7.35 old", // a third column
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "hack"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hack", "e2e-matrix.sh"), script, 0o755); err != nil {
			t.Fatal(err)
		}
		table := "# c\ncontainerd-1.6 apt\n" + row + "\n"
		if err := os.WriteFile(filepath.Join(dir, "hack", "containerd-lines.txt"), []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := e2eMatrix(dir); err == nil || !strings.Contains(err.Error(), "containerd-lines.txt:3") {
			t.Errorf("hack/e2e-matrix.sh with row %q: %v, want an error naming line 3", row, err)
		}
	}
}

type workflowStep struct {
	ID   string         `yaml:"id"`
	If   string         `yaml:"if"`
	Uses string         `yaml:"uses"`
	Run  string         `yaml:"run"`
	With map[string]any `yaml:"with"`
}

type workflowJob struct {
	Needs    any               `yaml:"needs"` // a job id or a list of them
	If       string            `yaml:"if"`
	Outputs  map[string]string `yaml:"outputs"`
	Strategy struct {
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
		t.Errorf("e2e.yml names %s: the runtimes and versions belong in hack/containerd-lines.txt and hack/build-crio.sh", name)
	}
	versions := map[string]string{} // version without v -> where it belongs
	for _, l := range containerdLines(t) {
		if l.version != "apt" {
			versions[strings.TrimPrefix(l.version, "v")] = "hack/containerd-lines.txt"
		}
	}
	if crio, err := os.ReadFile(filepath.Join(root, "hack", "build-crio.sh")); err == nil {
		if m := crioVersion.FindSubmatch(crio); m != nil {
			versions[strings.TrimPrefix(string(m[1]), "v")] = "hack/build-crio.sh"
		}
	}
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
	if len(restored) < 2 {
		t.Errorf("e2e restores %d builds, want the runtime's and the CNI plugins'", len(restored))
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
