package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
)

// orphanWait bounds the wait, after the command, for what it left running
// (a shim on its way out): their CPU counts once they are reaped.
const orphanWait = 30 * time.Second

// cpuAccount runs argv as a child subreaper, as the bench runs a catalog,
// so that what its processes leave behind (a runtime's shims, a conmon)
// comes back here and its CPU time is counted when it ends; it writes
// that CPU time (user and system, seconds) into file and returns the
// command's exit status. .ci/run runs make test this way: its CPU over
// the cores is the floor no schedule of its checks can beat on this
// machine, which the bench prints beside the 15-minute target. Signals
// the run gets (a cancelled CI job) pass on to the command.
func cpuAccount(file string, argv []string) int {
	stop, err := host.AdoptOrphans()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cnifault-bench cpu: becoming a child subreaper:", err)
		return report.ExitHarness
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "cnifault-bench cpu:", err)
		return report.ExitHarness
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	awaitOrphans(orphanWait)
	stop()
	exit := 0
	if st := (*exec.ExitError)(nil); errors.As(err, &st) {
		exit = st.ExitCode()
		if exit < 0 {
			exit = 2
		}
	} else if err != nil {
		exit = 2
	}
	if err := os.WriteFile(file, fmt.Appendf(nil, "%.1f\n", childrenCPU().Seconds()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "cnifault-bench cpu:", err)
	}
	return exit
}
