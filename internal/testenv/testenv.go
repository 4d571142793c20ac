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
// Paths are files; a program found through PATH is RequirePrograms'.
func Require(tb testing.TB, paths ...string) {
	tb.Helper()
	requireEach(tb, paths, func(p string) error { _, err := os.Stat(p); return err }, "needs %s (run make deps build)")
}

// RequirePrograms is Require for programs looked up in PATH, as the code
// under test runs them.
func RequirePrograms(tb testing.TB, programs ...string) {
	tb.Helper()
	requireEach(tb, programs, func(p string) error { _, err := exec.LookPath(p); return err }, "needs %s in PATH (run make deps)")
}

// requireEach needs root and every item that present finds (missing: a
// format naming it).
func requireEach(tb testing.TB, items []string, present func(string) error, missing string) {
	tb.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	}
	for _, it := range items {
		if present(it) != nil {
			why = fmt.Sprintf(missing, it)
		}
	}
	requireOr(tb, why)
}

// requireOr skips or, under CNIFAULT_REQUIRE, fails for why; an empty why
// lets the test run.
func requireOr(tb testing.TB, why string) {
	tb.Helper()
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
