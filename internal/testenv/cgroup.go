package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnifault/cnifault/fixtures/host"
)

// Cgroup2NSEnv marks a test binary that RunInCgroup2NS re-executed where
// /sys/fs/cgroup is the unified hierarchy.
const Cgroup2NSEnv = "CNIFAULT_IN_CGROUP2_NS"

// Cgroup2NSToolEnv names the cgroup2-ns tool where it is not at
// DefaultCgroup2NS.
const Cgroup2NSToolEnv = "CNIFAULT_CGROUP2_NS"

// DefaultCgroup2NS is where the development and CI machines keep the tool
// (a private mount namespace with cgroup2 mounted at /sys/fs/cgroup; read
// its header for what it can and cannot prove).
const DefaultCgroup2NS = "/work/shared/tools/cgroup2-ns"

// InCgroup2NS reports whether this test binary runs inside cgroup2-ns, as
// RunInCgroup2NS started it. A test there must find the unified layout:
// RequireUnifiedInside checks it.
func InCgroup2NS() bool { return os.Getenv(Cgroup2NSEnv) != "" }

// RequireUnifiedInside fails a test that runs inside cgroup2-ns but does not
// see the unified layout, which would make its pass say nothing about v2.
func RequireUnifiedInside(t *testing.T) {
	t.Helper()
	l := host.Cgroups()
	t.Logf("cgroup layout: mode %s, hierarchies %v", l.Mode, l.Hierarchies)
	if InCgroup2NS() && (l.Mode != host.CgroupV2 || len(l.Hierarchies) != 1 || !l.Hierarchies[0].Unified) {
		t.Fatalf("inside cgroup2-ns the layout is %+v, want the unified hierarchy alone at %s", l, host.CgroupRoot)
	}
}

// RunInCgroup2NS re-executes this test binary under cgroup2-ns, running the
// tests named in tests (each must run and pass there; a skip inside is a
// failure), and logs what they printed. Where the tool is absent it skips,
// and says so on stderr too, so that a run without -v shows that cgroup v2
// went unproven.
func RunInCgroup2NS(t *testing.T, tests ...string) {
	t.Helper()
	Require(t)
	if InCgroup2NS() {
		t.Skip("already inside cgroup2-ns")
	}
	tool := os.Getenv(Cgroup2NSToolEnv)
	if tool == "" {
		tool = DefaultCgroup2NS
	}
	if _, err := os.Stat(tool); err != nil {
		why := fmt.Sprintf("cgroup v2 NOT PROVEN: %s needs the cgroup2-ns tool (%v; set %s to its path)", t.Name(), err, Cgroup2NSToolEnv)
		fmt.Fprintln(os.Stderr, "SKIP "+why)
		t.Skip(why)
	}
	run := "^(" + strings.Join(tests, "|") + ")$"
	cmd := exec.Command(tool, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), Cgroup2NSEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s %s:\n%s", filepath.Base(tool), filepath.Base(os.Args[0]), "-test.run="+run, out)
	if err != nil {
		t.Fatalf("the tests failed inside cgroup2-ns: %v", err)
	}
	if !strings.Contains(string(out), "/sys/fs/cgroup: cgroup2fs") {
		t.Fatal("cgroup2-ns did not report cgroup2fs at /sys/fs/cgroup")
	}
	for _, name := range tests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + regexp.QuoteMeta(name) + ` `).Match(out) {
			t.Errorf("%s did not pass inside cgroup2-ns (skipped or not run)", name)
		}
	}
}

// PlaceInCgroup creates the cgroup path (e.g. "/cnifault-x/pod") in every
// hierarchy of the node's layout and moves the process pid into it there, as
// a runtime places a pod under its cgroup parent. It removes the cgroups
// the test made when the test ends (its processes must be gone by then:
// register their kill after this call).
func PlaceInCgroup(t *testing.T, pid int, path string) {
	t.Helper()
	l := host.Cgroups()
	if len(l.Hierarchies) == 0 {
		t.Fatalf("no cgroup hierarchy under %s", host.CgroupRoot)
	}
	top := "/" + strings.Split(strings.TrimPrefix(path, "/"), "/")[0]
	t.Cleanup(func() {
		Eventually(t, 10*time.Second, func() error { return host.RemoveCgroupTree(top) })
	})
	for _, h := range l.Hierarchies {
		dir := h.Path
		for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
			// A v1 cpuset cgroup takes no process until it has cpus
			// and mems: give it its parent's, as runc does.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if raw, err := os.ReadFile(filepath.Join(parent, f)); err == nil && !h.Unified {
					if err := os.WriteFile(filepath.Join(dir, f), raw, 0o644); err != nil {
						t.Fatalf("%s: %v", filepath.Join(dir, f), err)
					}
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("moving %d into %s: %v", pid, dir, err)
		}
	}
}
