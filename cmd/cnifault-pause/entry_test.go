//go:build amd64

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// build links ./cmd/cnifault-pause into a temporary file with ldflags.
func build(t *testing.T, ldflags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-ldflags="+ldflags, "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags=%q: %v\n%s", ldflags, err, out)
	}
	return bin
}

// firstSyscalls runs bin under ptrace and returns the number and first
// argument of each system call it makes until it has made n.
func firstSyscalls(t *testing.T, bin string, n int) [][2]uint64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("the pause did not stop at its exec: %v (%v)", err, ws)
	}
	var calls [][2]uint64
	for entry := true; len(calls) < n; entry = !entry {
		if err := syscall.PtraceSyscall(pid, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
			t.Fatalf("the pause did not stop at a system call: %v (%v)", err, ws)
		}
		if entry {
			var regs syscall.PtraceRegs
			if err := syscall.PtraceGetRegs(pid, &regs); err != nil {
				t.Fatal(err)
			}
			calls = append(calls, [2]uint64{regs.Orig_rax, regs.Rdi})
		}
	}
	return calls
}

// The pause handles SIGTERM and SIGINT before it runs anything else, as
// pause.c does: a runtime that stops a sandbox it has just started must not
// find its SIGTERM dropped (the kernel drops a signal with the default
// disposition sent to a PID 1) while the Go runtime starts. Linked without
// -E main.rt0, its first system calls are the Go runtime's, and -v refuses.
func TestHandlesStopSignalsFromItsEntryPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pause")
	}
	want := [][2]uint64{{syscall.SYS_RT_SIGACTION, uint64(syscall.SIGTERM)}, {syscall.SYS_RT_SIGACTION, uint64(syscall.SIGINT)}}
	entry := build(t, "-s -w -E main.rt0")
	if got := firstSyscalls(t, entry, 2); got[0] != want[0] || got[1] != want[1] {
		t.Errorf("linked with -E main.rt0, the pause's first system calls were %v, not rt_sigaction(SIGTERM) and rt_sigaction(SIGINT) %v", got, want)
	}
	if out, err := exec.Command(entry, "-v").Output(); err != nil || !strings.Contains(string(out), "handled from the entry point") {
		t.Errorf("-v of the pause linked with -E main.rt0: %v, %q", err, out)
	}

	plain := build(t, "-s -w")
	if got := firstSyscalls(t, plain, 2); got[0] == want[0] {
		t.Errorf("linked without -E, the pause's first system call was rt_sigaction(SIGTERM): the test cannot tell the two apart")
	}
	out, err := exec.Command(plain, "-v").Output()
	if err == nil || !strings.Contains(string(out), "built without -ldflags=-E=main.rt0") {
		t.Errorf("-v of the pause linked without -E: %v, %q; want exit 2 and what it lacks", err, out)
	}
}
