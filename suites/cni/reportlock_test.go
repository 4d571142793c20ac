package cni_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
)

// reportLockFile, in the report dir, is held with flock by the run writing
// there. Runs at once in one checkout are fine (each has its own instance,
// names and network), but two writing one report dir would leave a mix of
// both: the second is refused at once, before it changes anything, and
// told to use a report dir of its own. The kernel drops the lock when its
// run ends, however it ends.
const reportLockFile = ".cnifault.lock"

// reportLock is held for the process's lifetime.
var reportLock *os.File

// lockReportDir takes the report dir for this run. Only the first parallel
// process writes the report, so only it takes the lock.
func lockReportDir(dir string) error {
	if dir == "" || GinkgoParallelProcess() != 1 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, reportLockFile), os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("report dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("report dir %s is in use by another run: give each run at once its own (--report-dir, make e2e REPORT_DIR=...)", dir)
		}
		return fmt.Errorf("report dir %s: %w", dir, err)
	}
	reportLock = f
	return nil
}
