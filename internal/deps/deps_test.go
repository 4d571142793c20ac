package deps_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/internal/deps"
	"github.com/cnifault/cnifault/internal/testenv"
)

func programs(uses []deps.Use) []string {
	set := map[string]bool{}
	for _, u := range uses {
		set[u.Program] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func TestScanFindsEveryWayOfExecutingAProgram(t *testing.T) {
	uses, err := deps.Scan("testdata/sample")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"prog-command", "prog-context", "prog-exec", "prog-join", "prog-lookpath", "prog-path",
		"prog-script-a", "prog-script-b", "prog-script-c", "prog-unshared", "sh", "unshare"}
	if got := programs(uses); !slices.Equal(got, want) {
		t.Errorf("Scan found %q, want %q", got, want)
	}
}

// The list hack/deps.sh installs from and the programs the code executes
// agree: a program missing from the list would be missing on a fresh
// machine, and a listed program nothing runs is a stale entry.
func TestEveryExecutedProgramIsListed(t *testing.T) {
	root := testenv.RepoRoot(t)
	list, err := deps.Load(filepath.Join(root, "hack", "programs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	uses, err := deps.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range list {
		listed[p.Name] = true
	}
	used := map[string]bool{}
	for _, u := range uses {
		used[u.Program] = true
		if !listed[u.Program] {
			t.Errorf("%s executes %s, which hack/programs.txt does not list: add it with the package that provides it", u.Pos, u.Program)
		}
	}
	for _, p := range list {
		if p.RunByProject() && !used[p.Name] {
			t.Errorf("hack/programs.txt:%d lists %s as run by %s, but no Go source executes it by name", p.Line, p.Name, strings.Join(p.RunBy, ","))
		}
	}
}

func TestParseRejectsABadRow(t *testing.T) {
	for _, row := range []string{"nft apt:nftables all", "nft nftables all harness", "nft apt: all harness"} {
		if _, err := deps.Parse(strings.NewReader("# c\n" + row + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("Parse(%q) = %v, want an error naming line 2", row, err)
		}
	}
}

// hack/deps.sh installs for a runtime only what that runtime needs: a
// containerd run builds no CRI-O, and every run gets nftables.
func TestDepsChoosesWhatTheRuntimeNeeds(t *testing.T) {
	root := testenv.RepoRoot(t)
	list := func(runtimes ...string) (apt, build []string) {
		t.Helper()
		out, err := exec.Command("bash", append([]string{filepath.Join(root, "hack", "deps.sh"), "--list"}, runtimes...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("deps.sh --list %v: %v: %s", runtimes, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "apt":
				apt = strings.Fields(v)
			case "build":
				build = strings.Fields(v)
			}
		}
		return apt, build
	}
	// Vendor builds given by dir: a containerd's, a CRI-O's (crio and
	// pinns), and a dir holding neither.
	vendor := func(names ...string) string {
		dir := t.TempDir()
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/true\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	ctrdDir, crioDir := vendor("containerd", "containerd-shim-runc-v2", "ctr"), vendor("crio", "pinns")
	cases := []struct {
		runtimes        []string
		apt, notApt     []string
		build, notBuilt []string
	}{
		{[]string{"containerd-2.4"}, []string{"runc", "nftables", "iptables"}, []string{"conmon", "skopeo", "containerd"}, []string{"containerd@v2.4.2", "cni-plugins"}, []string{"crio@v1.34.0", "containerd@v1.7.35"}},
		{[]string{"containerd-1.7"}, []string{"runc", "nftables"}, []string{"conmon", "containerd"}, []string{"containerd@v1.7.35", "cni-plugins"}, []string{"crio@v1.34.0", "containerd@v2.4.2"}},
		{[]string{"containerd-1.6"}, []string{"containerd", "runc", "nftables"}, []string{"conmon"}, []string{"cni-plugins"}, []string{"crio@v1.34.0", "containerd@v2.4.2"}},
		{[]string{"crio-1.34"}, []string{"conmon", "skopeo", "runc", "nftables", "gcc"}, []string{"containerd"}, []string{"crio@v1.34.0", "cni-plugins"}, []string{"containerd@v2.4.2", "crio@v1.36.3"}},
		{[]string{"crio-1.36"}, []string{"conmon", "skopeo", "runc", "gcc"}, []string{"containerd"}, []string{"crio@v1.36.3", "cni-plugins"}, []string{"crio@v1.34.0", "crio@v1.35.2"}},
		{[]string{"crio-1.35", "crio-1.36"}, []string{"conmon", "gcc"}, nil, []string{"crio@v1.35.2", "crio@v1.36.3"}, []string{"crio@v1.34.0"}},
		{[]string{ctrdDir}, []string{"runc", "nftables"}, []string{"containerd", "conmon"}, []string{"cni-plugins"}, []string{"crio@v1.34.0", "containerd@v2.4.2"}},
		// A CRI-O build by dir needs CRI-O's helpers, but nothing built:
		// no compiler for pinns.
		{[]string{crioDir}, []string{"runc", "conmon", "skopeo", "nftables"}, []string{"containerd", "gcc", "make"}, []string{"cni-plugins"}, []string{"crio@v1.34.0", "crio@v1.36.3", "containerd@v2.4.2"}},
		{[]string{"containerd"}, []string{"runc"}, []string{"containerd", "conmon"}, []string{"cni-plugins"}, []string{"containerd@v2.4.2"}},
		{nil, []string{"containerd", "conmon", "skopeo", "nftables", "util-linux"}, nil, []string{"containerd@v1.7.35", "containerd@v2.0.14", "containerd@v2.4.2", "crio@v1.34.0", "crio@v1.35.2", "crio@v1.36.3", "cni-plugins"}, nil},
	}
	for _, c := range cases {
		apt, build := list(c.runtimes...)
		for _, p := range c.apt {
			if !slices.Contains(apt, p) {
				t.Errorf("deps.sh %v installs %v, missing %s", c.runtimes, apt, p)
			}
		}
		for _, p := range c.notApt {
			if slices.Contains(apt, p) {
				t.Errorf("deps.sh %v installs %s, which it does not need", c.runtimes, p)
			}
		}
		for _, b := range c.build {
			if !slices.Contains(build, b) {
				t.Errorf("deps.sh %v builds %v, missing %s", c.runtimes, build, b)
			}
		}
		for _, b := range c.notBuilt {
			if slices.Contains(build, b) {
				t.Errorf("deps.sh %v builds %s, which it does not need", c.runtimes, b)
			}
		}
	}
	if out, err := exec.Command("bash", filepath.Join(root, "hack", "deps.sh"), "--list", "containerd-9").CombinedOutput(); err == nil {
		t.Errorf("deps.sh accepted an unknown runtime: %s", out)
	}
	// A dir holding neither build is refused in one line, status 2, before
	// anything is chosen (let alone installed).
	empty := vendor("crio")
	out, err := exec.Command("bash", filepath.Join(root, "hack", "deps.sh"), "--list", empty).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 ||
		string(out) != "hack/deps.sh: "+empty+" holds neither a containerd build (containerd) nor a CRI-O build (crio and pinns)\n" {
		t.Errorf("deps.sh --list %s: %v: %q, want one line and status 2", empty, err, out)
	}
}
