package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/fixtures/host"
)

// Fataler is what Chrooted needs of a test: a testing.TB, or Ginkgo's
// GinkgoT().
type Fataler interface {
	Helper()
	Fatal(args ...any)
}

// Chrooted reports whether this process runs chrooted, as
// ../shared/tools/fresh-debian runs CI: a program started in this
// process's own mount namespace, which setns(2) moves to the namespace's
// root, then has another root than this process. A test that enters a
// mount namespace cannot name its own paths from there.
func Chrooted(t Fataler) bool {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "stat -c %d:%i /")
	var out strings.Builder
	cmd.Stdout = &out
	if err := host.StartInMountNS(os.Getpid(), cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String()) != fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}
