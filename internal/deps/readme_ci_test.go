package deps_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/internal/testenv"
)

// The README's CI job is one a runtime project copies as it is: it must be
// a valid workflow (actionlint), and what it runs must exist here —
// hack/gate.sh, cnifault's clean command, the files its cache key hashes.
func TestTheREADMEsCIJobIsAValidWorkflow(t *testing.T) {
	root := testenv.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(raw)[strings.Index(string(raw), "\n## In CI\n")+1:], "## In CI\n")
	if !ok {
		t.Fatal("README.md has no section ## In CI")
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("README.md's In CI has no yaml block")
	}
	job := m[1]
	for _, want := range []string{"cnifault/hack/gate.sh", "cnifault/_output/bin/cnifault clean", "if: always()",
		"hashFiles('cnifault/go.mod', 'cnifault/hack/programs.txt')", "path: ~/.cache/cnifault"} {
		if !strings.Contains(job, want) {
			t.Errorf("the README's CI job lacks %q", want)
		}
	}
	for _, f := range []string{"hack/gate.sh", "go.mod", "hack/programs.txt"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the README's CI job uses %s: %v", f, err)
		}
	}
	dir := filepath.Join(t.TempDir(), ".github", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "cnifault.yml")
	if err := os.WriteFile(wf, []byte("name: cnifault\non: [push, pull_request]\n"+job), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "actionlint", "-shellcheck=", wf)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("actionlint on the README's CI job: %v\n%s", err, out)
	}
}

// README.md is a user's first screen, not the manual: at most about 250
// lines, and every file under docs/ reachable from it.
func TestTheREADMEIsShortAndReachesEveryDoc(t *testing.T) {
	root := testenv.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 250 {
		t.Errorf("README.md has %d lines: move what is not for a new user into docs/", n)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	for _, d := range docs {
		if link := "(docs/" + filepath.Base(d) + ")"; !strings.Contains(string(raw), link) {
			t.Errorf("README.md does not link %s", link)
		}
	}
}
