package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cnifault/cnifault/fixtures/host"
)

// cnifault-bench cpu passes the command's exit status on, writes the CPU
// time, and leaves nothing the command left behind unreaped: an orphan it
// adopted (a shim's stand-in here) is waited for, so its time counts.
func TestCPUAccountKeepsTheExitStatusAndReapsWhatTheCommandLeft(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu")
	marker := filepath.Join(t.TempDir(), "orphan-done")
	// The orphan outlives its parent's exit and ends on its own.
	script := `(sleep 0.3; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; : > "$1") & exit 3`
	if got := cpuAccount(file, []string{"/bin/sh", "-c", script, "sh", marker}); got != 3 {
		t.Fatalf("exit status %d, want the command's 3", got)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("cpu returned before the orphan it adopted ended: %v", err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64); err != nil || s < 0 {
		t.Fatalf("CPU written as %q", raw)
	}
	table, _ := host.ReadProcTable()
	for _, p := range table {
		if p.PPID == os.Getpid() && p.Zombie() {
			t.Errorf("a zombie child left unreaped: %d %v", p.PID, p.Argv)
		}
	}
}
