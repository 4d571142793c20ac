package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cnifault/cnifault/fixtures/host"
)

// HelperReady is what a helper process prints once it stands where the
// test wants it (a harness with its runtime up and a pod running).
const HelperReady = "ready"

// StartHelper runs the test binary's test run as a helper process, with
// env added, and returns once it printed HelperReady: a stand-in for a
// harness that the test then kills outright. The helper is killed at the
// test's end if it still runs.
func StartHelper(t *testing.T, run string, timeout time.Duration, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == HelperReady {
				ready <- true
				return
			}
			fmt.Fprintf(os.Stderr, "helper: %s\n", sc.Text())
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("the helper %s ended before it was ready", run)
		}
	case <-time.After(timeout):
		t.Fatalf("the helper %s was not ready within %s", run, timeout)
	}
	return cmd
}

// RequireGone waits up to 10 s for each of an instance's resources to
// leave the node, and fails the test naming those still there: a mount
// under its work or state dir, either dir, its cgroup parent in any
// hierarchy, or its bridge. A sweep's kills and unmounts land a moment after
// it returns on a loaded machine, so one look would be a race.
func RequireGone(t *testing.T, workDir, stateDir, cgroupParent, bridge string) {
	t.Helper()
	Eventually(t, 10*time.Second, func() error {
		var left []string
		if ms, _ := host.MountsUnder(workDir, stateDir); len(ms) > 0 {
			left = append(left, fmt.Sprintf("mounts %v", ms))
		}
		for _, p := range append([]string{workDir, stateDir, filepath.Join("/sys/class/net", bridge)}, host.CgroupPaths(cgroupParent)...) {
			if _, err := os.Lstat(p); err == nil {
				left = append(left, p)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left on the node: %v", left)
		}
		return nil
	})
}

// FilesUnder lists every file (not a dir) below root: what a dir that
// should be empty but for its layout still holds.
func FilesUnder(root string) []string {
	var files []string
	_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}
