package main

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dieBySignal ends the process by sig, as the runtime would observe a plugin
// that segfaulted or aborted. Raising the signal is not enough: the Go
// runtime handles SIGSEGV, SIGABRT, SIGQUIT and friends itself and turns them
// into "exit status 2" with a stack dump. So the disposition is first reset
// to SIG_DFL, which os/signal cannot do for signals the runtime owns.
func dieBySignal(sig syscall.Signal) {
	if sig != unix.SIGKILL && sig != unix.SIGSTOP {
		// An all-zero kernel sigaction is SIG_DFL with no flags and an
		// empty mask, whatever the architecture's field layout; the buffer
		// is larger than any of them.
		var dfl [128]byte
		const sigsetSize = 8
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, sigsetSize, 0, 0) //nolint:errcheck // SIGKILL below is the fallback
	}
	unix.Kill(os.Getpid(), sig) //nolint:errcheck // SIGKILL below is the fallback
	// A fatal signal is delivered before kill(2) returns to a thread that
	// does not block it; should it ever not be, still never return.
	time.Sleep(time.Second)
	unix.Kill(os.Getpid(), unix.SIGKILL) //nolint:errcheck // nothing left to try
	for {
		time.Sleep(time.Hour)
	}
}
