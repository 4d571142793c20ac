package deps_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/fixtures/kubelet"
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
	for _, row := range []string{"nft apt:nftables all harness", "nft nftables all harness -", "nft apt: all harness -",
		"go go all deps 1.26", "nft apt:nftables all harness one", "nft apt:nftables all harness 1.0.6 x"} {
		if _, err := deps.Parse(strings.NewReader("# c\n" + row + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("Parse(%q) = %v, want an error naming line 2", row, err)
		}
	}
	// One package's rows agree on its min: deps.sh checks it once.
	if _, err := deps.Parse(strings.NewReader("iptables apt:iptables all plugins 1.8.9\nip6tables apt:iptables all plugins 1.8.7\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Parse accepted two mins for one package: %v", err)
	}
	ps, err := deps.Parse(strings.NewReader("nft apt:nftables all harness 1:1.0.6\nsh apt:dash all harness -\n"))
	if err != nil || ps[0].Min != "1:1.0.6" || ps[1].Min != "" {
		t.Errorf("Parse = %+v, %v", ps, err)
	}
}

// hack/deps.sh installs for a runtime only what that runtime needs: a
// containerd run builds no CRI-O, every run gets nftables, every managed
// runtime the pinned runc (and what building it needs), and no run a
// distribution's containerd or runc; the kubelet only with --kubelet.
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
	runcTag := daemon.RuncVersion
	kubeletBuild := "kubelet@" + kubelet.PinnedVersion
	cases := []struct {
		runtimes        []string
		apt, notApt     []string
		build, notBuilt []string
	}{
		{[]string{"containerd-2.4"}, []string{"nftables", "iptables", "gcc", "libseccomp-dev"}, []string{"conmon", "skopeo", "containerd", "runc"}, []string{"containerd@v2.4.2", "runc@" + runcTag, "cni-plugins"}, []string{"crio@v1.34.0", "containerd@v1.7.36", kubeletBuild}},
		// For a runtime, the kubelet only with --kubelet (make deps
		// KUBELET=1), beside what the runtime needs.
		{[]string{"--kubelet", "containerd-2.4"}, []string{"nftables", "gcc", "libc6-dev"}, []string{"conmon", "skopeo"}, []string{kubeletBuild, "containerd@v2.4.2", "runc@" + runcTag, "cni-plugins"}, []string{"crio@v1.34.0", "containerd@v1.7.36"}},
		{[]string{"--kubelet"}, []string{"conmon", "gcc"}, nil, []string{kubeletBuild, "containerd@v1.6.38", "crio@v1.36.3"}, nil},
		{[]string{"containerd-1.7"}, []string{"nftables"}, []string{"conmon", "containerd", "runc"}, []string{"containerd@v1.7.36", "runc@" + runcTag, "cni-plugins"}, []string{"crio@v1.34.0", "containerd@v2.4.2"}},
		// 1.6 is built from its module like every line: no Debian package.
		{[]string{"containerd-1.6"}, []string{"nftables"}, []string{"containerd", "runc", "conmon"}, []string{"containerd@v1.6.38", "runc@" + runcTag, "cni-plugins"}, []string{"crio@v1.34.0", "containerd@v2.4.2"}},
		{[]string{"crio-1.34"}, []string{"conmon", "skopeo", "nftables", "gcc", "make"}, []string{"containerd", "runc"}, []string{"crio@v1.34.0", "runc@" + runcTag, "cni-plugins"}, []string{"containerd@v2.4.2", "crio@v1.36.3"}},
		{[]string{"crio-1.36"}, []string{"conmon", "skopeo", "gcc"}, []string{"containerd", "runc"}, []string{"crio@v1.36.3", "runc@" + runcTag, "cni-plugins"}, []string{"crio@v1.34.0", "crio@v1.35.2"}},
		{[]string{"crio-1.35", "crio-1.36"}, []string{"conmon", "gcc"}, nil, []string{"crio@v1.35.2", "crio@v1.36.3"}, []string{"crio@v1.34.0"}},
		// A build by dir runs on the pinned runc, built for it.
		{[]string{ctrdDir}, []string{"nftables", "libseccomp-dev"}, []string{"containerd", "conmon", "runc"}, []string{"cni-plugins", "runc@" + runcTag}, []string{"crio@v1.34.0", "containerd@v2.4.2"}},
		// A CRI-O build by dir needs CRI-O's helpers and the pinned runc,
		// but no CRI-O built: no make for pinns.
		{[]string{crioDir}, []string{"conmon", "skopeo", "nftables", "gcc"}, []string{"containerd", "runc", "make"}, []string{"cni-plugins", "runc@" + runcTag}, []string{"crio@v1.34.0", "crio@v1.36.3", "containerd@v2.4.2"}},
		{[]string{"containerd"}, []string{"libseccomp-dev"}, []string{"containerd", "conmon", "runc"}, []string{"cni-plugins", "runc@" + runcTag}, []string{"containerd@v2.4.2"}},
		// Everything (make test, which runs kubelet mode on one runtime):
		// the kubelet too.
		{nil, []string{"conmon", "skopeo", "nftables", "util-linux", "libseccomp-dev"}, []string{"containerd", "runc"}, []string{"containerd@v1.6.38", "containerd@v1.7.36", "containerd@v2.0.14", "containerd@v2.4.2", "crio@v1.34.0", "crio@v1.35.2", "crio@v1.36.3", "runc@" + runcTag, "cni-plugins", kubeletBuild}, nil},
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

// `make deps` prints the version found of each distribution package it
// chose, and refuses one older than its min in one line, status 2: here
// bash, which every run needs, against a min no bash has.
func TestDepsRefusesAPackageOlderThanItsMin(t *testing.T) {
	testenv.RequirePrograms(t, "dpkg-query")
	root := testenv.RepoRoot(t)
	out, err := exec.Command("bash", filepath.Join(root, "hack", "deps.sh"), "--versions", "containerd-2.4").CombinedOutput()
	if err != nil {
		t.Fatalf("deps.sh --versions on this node: %v: %s", err, out)
	}
	found := regexp.MustCompile(`(?m)^\[deps\] found bash \S+ \(>= 4\.0\)$`)
	if !found.Match(out) {
		t.Errorf("deps.sh --versions does not print bash's version and min:\n%s", out)
	}
	// A copy of the scripts and tables with bash's min raised past any
	// bash.
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "hack"), os.DirFS(filepath.Join(root, "hack"))); err != nil {
		t.Fatal(err)
	}
	programs := filepath.Join(tmp, "hack", "programs.txt")
	raw, err := os.ReadFile(programs)
	if err != nil {
		t.Fatal(err)
	}
	bashRow := regexp.MustCompile(`(?m)^(bash\s+apt:bash\s+\S+\s+\S+\s+)4\.0$`)
	if !bashRow.Match(raw) {
		t.Fatal("hack/programs.txt has no bash row with min 4.0")
	}
	if err := os.WriteFile(programs, bashRow.ReplaceAll(raw, []byte("${1}999.0")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("bash", filepath.Join(tmp, "hack", "deps.sh"), "--versions", "containerd-2.4").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	if !ok || ee.ExitCode() != 2 || !regexp.MustCompile(`^hack/deps\.sh: bash \S+ is older than 999\.0, the oldest cnifault accepts \(hack/programs\.txt\)$`).MatchString(last) {
		t.Errorf("deps.sh --versions with bash's min at 999.0: %v: %q, want status 2 and one line naming bash", err, out)
	}
}
