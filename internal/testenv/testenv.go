// Package testenv holds what the project's plain Go tests share: finding the
// repository and deciding whether a test that needs the real machine may
// skip. It has no Ginkgo dependency.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Require skips where the real thing cannot run (not root, a built file
// missing), unless CNIFAULT_REQUIRE is set, as `make test` sets it: there a
// missing prerequisite fails, because a test that silently skips proves
// nothing.
func Require(tb testing.TB, paths ...string) {
	tb.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			why = fmt.Sprintf("needs %s (run make deps build)", p)
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CNIFAULT_REQUIRE") != "" {
		tb.Fatal(why)
	}
	tb.Skip(why)
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// RepoRoot is the module's root directory.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	rootOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		root, rootErr = filepath.Dir(strings.TrimSpace(string(out))), err
	})
	if rootErr != nil {
		tb.Fatal(rootErr)
	}
	return root
}

// Built returns the absolute path of a file `make deps build` produces under
// _output (e.g. "cni/bin/host-local"), requiring it as Require does.
func Built(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "_output", rel)
	Require(tb, p)
	return p
}
