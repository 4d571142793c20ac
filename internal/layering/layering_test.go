package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/internal/testenv"
)

const module = "github.com/cnifault/cnifault/"

// allowed lists, for each package's non-test files, the project packages it
// may import; a package missing from the table may import none. Test files
// may reach further down or sideways (inspect's tests bring up a real
// runtime to make real leaks), but never up into suites. A suite is all
// _test.go files: the table holds for them.
var allowed = map[string][]string{
	"cniconf":                   {},
	"cmd/cni-fault":             {"cniconf"},
	"cmd/cnifault-nri":          {"cniconf"},
	"cmd/cnifault-pause":        {},
	"cmd/cnifault-runc-wrapper": {"cniconf"},
	"fixtures/host":             {},
	"fixtures/cri":              {},
	"fixtures/image":            {},
	// The report's host facts read the cgroup mode where the harness's
	// cgroup code reads it, so the two never disagree.
	"fixtures/report": {"fixtures/host"},
	// An inventory's resource is the report's Leak: what a diff finds goes
	// into the report as it is.
	"fixtures/inspect": {"cniconf", "fixtures/host", "fixtures/cri", "fixtures/report"},
	// The managed-runtime base, and the adapters that build on it: an
	// adapter knows nothing of inventories, reports or CNI configs.
	"fixtures/daemon":     {"fixtures/host", "fixtures/cri", "fixtures/image"},
	"fixtures/containerd": {"fixtures/daemon", "fixtures/host", "fixtures/cri", "fixtures/image", "internal/modsrc"},
	"fixtures/crio":       {"fixtures/daemon", "fixtures/host", "fixtures/cri", "fixtures/image"},
	// A real kubelet on a runtime instance's endpoint: it runs as a
	// daemon does, and knows the runtime only by its CRI endpoint; it is
	// built as the containerd lines are (internal/modsrc).
	"fixtures/kubelet": {"fixtures/daemon", "fixtures/host", "fixtures/cri", "fixtures/image", "internal/modsrc"},
	// The registry of managed kinds: one row per adapter.
	"fixtures/runtimes": {"fixtures/containerd", "fixtures/crio", "fixtures/daemon", "fixtures/cri"},
	// The adapter of an endpoint already running on the node: it reads the
	// node's runtime config as the adapters know it, and writes the run's
	// record (cnifault restore).
	"fixtures/external": {"cniconf", "fixtures/runtimes", "fixtures/containerd", "fixtures/crio", "fixtures/daemon",
		"fixtures/host", "fixtures/cri", "fixtures/inspect"},
	// cnifault bisect builds containerd tags itself (containerd.Build):
	// no runtime is brought up by the command, only by the runs it starts.
	// Node mode starts the run again in the host's mount namespace
	// (host.RunInMountNS). `cnifault gate` and compare judge reports read
	// back by the rules (fixtures/verdict), --require-coverage's too.
	"fixtures/cli": {"cniconf", "fixtures/runtimes", "fixtures/external", "fixtures/report", "fixtures/verdict", "fixtures/bisect", "fixtures/containerd",
		"fixtures/modproxy", "fixtures/sonobuoy", "fixtures/host", "fixtures/kubelet", "hack"},
	// Sonobuoy's worker contract: a run's report dir handed over.
	"fixtures/sonobuoy": {"fixtures/report"},
	// The search over containerd's tags: it knows the report it reads (and
	// the rules' Outcome of a scenario), the tags that exist (modproxy),
	// and the cnifault binary only as a program to run.
	"fixtures/bisect": {"fixtures/report", "fixtures/verdict", "fixtures/modproxy"},
	// The tags a Go module proxy lists or serves by name, shared by bisect
	// and the runtime tables' check (internal/deps); and its fake proxy
	// for tests.
	"fixtures/modproxy":              {},
	"fixtures/modproxy/modproxytest": {},
	// Verdicts and the report know the inventory's and the journal's data,
	// never a runtime.
	"fixtures/verdict": {"cniconf", "fixtures/inspect", "fixtures/report"},
	// One scenario's life on the runtime, without Ginkgo: it knows the
	// runtime through fixtures/runtimes, as the suite does.
	"fixtures/scenario": {"cniconf", "fixtures/runtimes", "fixtures/inspect", "fixtures/host",
		"fixtures/report", "fixtures/verdict"},
	// The expectations file embedded (a build carries the expectations it
	// shipped with): data, importing nothing.
	"hack":              {},
	"internal/testenv":  {"fixtures/host"},
	"internal/layering": {},
	"internal/deps":     {},
	"cmd/cnifault-soak": {"fixtures/report", "fixtures/verdict"},
	// Building a program inside a copy of its module's source tree, shared
	// by the containerd and kubelet builds.
	"internal/modsrc": {},
	// hack/deps.sh's containerd and kubelet builder: the same Builds bisect
	// and kubelet mode use.
	"cmd/cnifault-build": {"fixtures/containerd", "fixtures/kubelet"},
	// make bench: the managed runtimes' list, the outcome it compares runs
	// by, and the subreaper that brings a catalog's orphans' CPU time home.
	"cmd/cnifault-bench": {"fixtures/report", "fixtures/verdict", "fixtures/runtimes", "fixtures/host"},
	// make image: the harness's own image, as the pause image is built.
	"cmd/cnifault-image": {"fixtures/image"},
	// A runtime's goroutine dump read for what a verdict rests on: it knows
	// only the dump's text.
	"fixtures/stacks": {},
	// The CRI proxy between a standalone kubelet and a managed runtime,
	// recording kubelet's calls: it knows only cri-api and grpc.
	"fixtures/criproxy": {},
	// The conformance suite knows runtimes only through fixtures/runtimes.
	"suites/cni": {"cniconf", "fixtures/cli", "fixtures/verdict", "fixtures/scenario", "fixtures/runtimes", "fixtures/external",
		"fixtures/inspect", "fixtures/host", "fixtures/cri", "fixtures/report", "fixtures/stacks", "fixtures/kubelet", "fixtures/criproxy", "hack"},
}

// Packages that may import anything but suites: the self-validation starts
// runtimes of its own as stand-ins for a node's.
var anythingBelowSuites = []string{"suites/selfvalidation"}

// cliPackage is the command line: it stands on the engine, so no package
// but the suites' entry imports it, not even from a test.
const cliPackage = "fixtures/cli"

var testFrameworks = []string{"github.com/onsi/ginkgo", "github.com/onsi/gomega"}

// violation is one import against the direction.
type violation struct{ file, imp, why string }

// check walks root's Go files and returns every import against the rules.
func check(root string) ([]violation, error) {
	var out []violation
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		isTest := strings.HasSuffix(path, "_test.go")
		for _, is := range f.Imports {
			imp := strings.Trim(is.Path.Value, `"`)
			if why := judge(pkg, imp, isTest); why != "" {
				out = append(out, violation{rel, imp, why})
			}
		}
		return nil
	})
	return out, err
}

// judge says why pkg may not import imp, or "" when it may.
func judge(pkg, imp string, isTest bool) string {
	inSuites := strings.HasPrefix(pkg, "suites/")
	for _, tf := range testFrameworks {
		if strings.HasPrefix(imp, tf) && !inSuites {
			return "Ginkgo and Gomega belong in suites/; engine packages have plain Go tests"
		}
	}
	target, ok := strings.CutPrefix(imp, module)
	if !ok {
		return ""
	}
	switch {
	case strings.HasPrefix(target, "suites/"):
		return "nothing imports suites"
	case target == cliPackage && pkg != cliPackage && !inSuites:
		return "no engine package imports the command line (" + cliPackage + "): it stands on the engine"
	case target == "internal/testenv" && !isTest:
		return "internal/testenv is for tests only"
	case (isTest && !inSuites) || target == pkg || slices.Contains(anythingBelowSuites, pkg):
		return ""
	}
	rules, known := allowed[pkg]
	if !known {
		return "package " + pkg + " has no entry in the layering table: give it one"
	}
	if !slices.Contains(rules, target) {
		return pkg + " may import only " + strings.Join(rules, ", ")
	}
	return ""
}

func TestImportsFollowTheDirection(t *testing.T) {
	vs, err := check(testenv.RepoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("%s imports %s: %s", v.file, v.imp, v.why)
	}
}

// The checker itself, on a tree that breaks every rule once: a test that
// cannot fail would prove nothing.
func TestEveryRuleIsEnforced(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cniconf/a.go", `package cniconf; import _ "`+module+`fixtures/host"`)
	write("fixtures/inspect/a.go", `package inspect; import _ "github.com/onsi/gomega"`)
	write("fixtures/report/a.go", `package report; import _ "`+module+`suites/cni"`)
	write("fixtures/host/a.go", `package host; import _ "`+module+`internal/testenv"`)
	write("suites/cni/a_test.go", `package cni; import _ "`+module+`fixtures/containerd"`)
	write("fixtures/newpkg/a.go", `package newpkg; import _ "`+module+`cniconf"`)
	write("fixtures/scenario/a.go", `package scenario; import _ "`+module+`fixtures/cli"`)
	write("fixtures/verdict/a_test.go", `package verdict; import _ "`+module+`fixtures/cli"`)
	// Allowed: a test reaching sideways, and the self-validation's stand-ins.
	write("fixtures/inspect/b_test.go", `package inspect; import _ "`+module+`fixtures/containerd"`)
	write("suites/selfvalidation/a_test.go", `package sv; import _ "`+module+`fixtures/containerd"`)
	vs, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.file)
	}
	sort.Strings(got)
	want := []string{"cniconf/a.go", "fixtures/host/a.go", "fixtures/inspect/a.go", "fixtures/newpkg/a.go", "fixtures/report/a.go",
		"fixtures/scenario/a.go", "fixtures/verdict/a_test.go", "suites/cni/a_test.go"}
	if !slices.Equal(got, want) {
		t.Fatalf("violations in %v, want %v (%+v)", got, want, vs)
	}
}
