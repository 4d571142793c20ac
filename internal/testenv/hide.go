package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// HiddenEnv marks a test binary that RunWithout re-executed where the
// programs it lists (comma-separated) cannot be found.
const HiddenEnv = "CNIFAULT_HIDDEN_PROGRAMS"

// sbinDirs are where the harness looks for a tool after PATH
// (fixtures/inspect's tool): hiding a program must cover them too.
var sbinDirs = []string{"/usr/sbin", "/sbin"}

// Without is the command line that runs argv where none of programs can
// be found, while everything else on the node is as it is: a private mount
// namespace (unshare -m; nothing outside it changes, and it ends with the
// command's last process) in which /dev/null, a file nobody may execute,
// is bind-mounted over each file of that name on PATH or in /usr/sbin and
// /sbin, so that neither exec.LookPath nor a look in the sbin dirs finds
// it. A mount follows symlinks: a program reached through one (iptables-save
// -> xtables-nft-multi) is hidden under every name it has, so only a
// program that is a file of its own (nft) can be hidden alone. It fails
// the test where a program is not on the node to begin with, since hiding
// it would then prove nothing.
func Without(tb Fataler, programs []string, argv ...string) []string {
	tb.Helper()
	var files []string
	for _, p := range programs {
		found := false
		for _, d := range append(filepath.SplitList(os.Getenv("PATH")), sbinDirs...) {
			f := filepath.Join(d, p)
			if st, err := os.Stat(f); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				continue
			}
			found = true
			if real, err := filepath.EvalSymlinks(f); err == nil && !slices.Contains(files, real) {
				files = append(files, real)
			}
		}
		if !found {
			tb.Fatal(fmt.Sprintf("%s is not on PATH nor in %s: there is nothing to hide", p, strings.Join(sbinDirs, ", ")))
		}
	}
	script := "set -e\n"
	for _, f := range files {
		script += fmt.Sprintf("mount --bind /dev/null '%s'\n", strings.ReplaceAll(f, "'", `'\''`))
	}
	script += `exec "$@"`
	return append([]string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"}, argv...)
}

// RunWithout re-executes this test binary where programs cannot be found
// (Without), running the tests named in tests with HiddenEnv set (each must
// run and pass there; a skip inside is a failure), and logs what they
// printed.
func RunWithout(t *testing.T, programs []string, tests ...string) {
	t.Helper()
	Require(t)
	RequirePrograms(t, "unshare", "mount")
	run := "^(" + strings.Join(tests, "|") + ")$"
	argv := Without(t, programs, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), HiddenEnv+"="+strings.Join(programs, ","))
	out, err := cmd.CombinedOutput()
	t.Logf("without %s: %s -test.run=%s:\n%s", strings.Join(programs, ", "), filepath.Base(os.Args[0]), run, out)
	if err != nil {
		t.Fatalf("the tests failed without %s: %v", strings.Join(programs, ", "), err)
	}
	for _, name := range tests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + regexp.QuoteMeta(name) + ` `).Match(out) {
			t.Errorf("%s did not pass without %s (skipped or not run)", name, strings.Join(programs, ", "))
		}
	}
}

// Hidden reports whether this test binary runs where RunWithout hid
// programs from it.
func Hidden() bool { return os.Getenv(HiddenEnv) != "" }
