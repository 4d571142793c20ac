// Command cnifault-pause is the infra ("pause") process of the pod sandboxes
// the cnifault harness creates. It does what kubernetes' pause.c does: it runs
// as PID 1 of the sandbox, holds the pod's namespaces open, reaps zombie
// children and exits 0 when asked to stop.
//
// It exists because the machines the harness runs on have no image registry:
// instead of pulling registry.k8s.io/pause, the project builds this static
// binary from source and packs it into a sandbox image itself (see
// fixtures/image). Build it with
//
//	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -E main.rt0' -o pause ./cmd/cnifault-pause
//
// -E main.rt0 (amd64) starts it at an entry point that handles SIGTERM and
// SIGINT as pause.c does, before the Go runtime starts (entry_amd64.s).
// Without it, -v says what it lacks and exits 2, and the harness refuses it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is printed by -v.
const version = "cnifault-pause v2"

func main() {
	for _, a := range os.Args[1:] {
		if a == "-v" || a == "--v" {
			note, ok := entryNote()
			fmt.Printf("%s: %s\n", version, note)
			if !ok {
				os.Exit(2)
			}
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "usage: %s [-v]\n", os.Args[0])
		os.Exit(2)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited; SIGCHLD signals coalesce, so one
// signal may stand for several dead children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
