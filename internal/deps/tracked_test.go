package deps_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/internal/testenv"
)

// isBinary tells what a build leaves behind from text: any file with a NUL
// byte in its first 8 KiB, git's own test for binary content. Executables
// and objects of every format (ELF, Mach-O, PE, Go archives) carry NULs in
// their headers.
func isBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

// The repository tracks sources, never what they build: a committed binary
// is unreviewable, stale the moment its source changes, and bloats every
// clone (a 3.3 MB cnifault-runc-wrapper sat at the root). Binaries go to
// _output (make build) or are ignored (.gitignore).
func TestNoBinaryIsTracked(t *testing.T) {
	root := testenv.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("%s is not a git checkout: nothing is tracked", root)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		head := make([]byte, 8192)
		n, _ := f.Read(head)
		f.Close()
		if isBinary(head[:n]) {
			t.Errorf("%s is a binary and is tracked: remove it (git rm --cached %s) and let .gitignore or _output hold it", name, name)
		}
	}
}

// The test above finds what it looks for: an executable, and text it must
// leave alone.
func TestIsBinaryTellsBuildsFromText(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 8192)
	f, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := f.Read(head)
	f.Close()
	if !isBinary(head[:n]) {
		t.Errorf("the test binary %s is not told a binary", self)
	}
	for _, text := range []string{"package deps\n", "# Makefile\nall:\n", "{\"schema\": \"cnifault/v1\"}\n", "naïve — ünïcode\n"} {
		if isBinary([]byte(text)) {
			t.Errorf("%q is told a binary", text)
		}
	}
}
