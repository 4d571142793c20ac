// Command cnifault-runc-wrapper stands in for runc where the host refuses
// what a runtime asks of runc, and then execs the real runc with its argv
// unchanged.
//
// The one adaptation it makes: on "create" and "run" it raises the bundle's
// process.oomScoreAdj to the lowest value this process may set. A node
// without CAP_SYS_RESOURCE (a container or a VM sandbox that drops it) lets
// a process raise oom_score_adj but not lower it below its own, and runc
// then fails with "failed to update /proc/self/oom_score_adj: Permission
// denied" — CRI-O asks for -998 on every infra container and has no setting
// to restrict it (containerd has restrict_oom_score_adj). The harness uses
// the wrapper only when a probe shows the host needs it.
//
// A second use: with $CNIFAULT_RUNC_FAULTS naming a dir of
// cniconf.RuncFaults, a create of a container whose bundle names a faulted
// pod fails before runc runs (journaled first), which is how the harness
// breaks a sandbox's start after its network is up.
//
// The real runc is $CNIFAULT_RUNC, or "runc" on PATH.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cnifault/cnifault/cniconf"
)

// RealRuncEnv names the environment variable holding the real runc's path.
const RealRuncEnv = "CNIFAULT_RUNC"

func main() {
	runc, err := realRunc()
	if err != nil {
		fail(err)
	}
	if bundle, ok := bundleOf(os.Args[1:]); ok {
		if err := injectFault(os.Getenv(cniconf.RuncFaultsEnv), bundle, os.Args[1:]); err != nil {
			fail(err)
		}
		floor, err := ownOOMScoreAdj()
		if err != nil {
			fail(err)
		}
		if _, err := clampOOMScoreAdj(filepath.Join(bundle, "config.json"), floor); err != nil {
			fail(err)
		}
	}
	argv := append([]string{runc}, os.Args[1:]...)
	fail(syscall.Exec(runc, argv, os.Environ()))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "cnifault-runc-wrapper: %v\n", err)
	os.Exit(1)
}

func realRunc() (string, error) {
	if p := os.Getenv(RealRuncEnv); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("runc")
	if err != nil {
		return "", fmt.Errorf("no real runc: set %s or put runc on PATH: %w", RealRuncEnv, err)
	}
	return filepath.Abs(p)
}

// globalValueFlags are runc's global flags that take a value; the first
// argument that is neither one of them, nor their value, nor another flag
// is the subcommand.
var globalValueFlags = map[string]bool{
	"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true,
}

// bundleOf returns the bundle dir of a "create" or "run" invocation: the
// value of --bundle/-b, or the working dir, as runc defaults to it.
func bundleOf(args []string) (string, bool) {
	i := 0
	for i < len(args) {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if globalValueFlags[a] {
			i++
		}
		i++
	}
	if i >= len(args) || (args[i] != "create" && args[i] != "run") {
		return "", false
	}
	for k := i + 1; k < len(args); k++ {
		a := args[k]
		if a == "--" {
			break
		}
		for _, f := range []string{"--bundle", "-bundle", "-b", "--b"} {
			if a == f && k+1 < len(args) {
				return args[k+1], true
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v, true
			}
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	return wd, true
}

func ownOOMScoreAdj() (int, error) {
	raw, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(raw)))
}

// clampOOMScoreAdj raises process.oomScoreAdj in the OCI config at path to
// floor where it is lower, and reports whether it changed the file. Every
// other field keeps its value (objects come out compacted, keys sorted); the
// file is replaced atomically, with its mode.
func clampOOMScoreAdj(path string, floor int) (bool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &spec); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	var process map[string]json.RawMessage
	if p, ok := spec["process"]; !ok || json.Unmarshal(p, &process) != nil || process == nil {
		return false, nil
	}
	adjRaw, ok := process["oomScoreAdj"]
	if !ok {
		return false, nil
	}
	var adj int
	if err := json.Unmarshal(adjRaw, &adj); err != nil {
		return false, fmt.Errorf("%s: process.oomScoreAdj: %w", path, err)
	}
	if adj >= floor {
		return false, nil
	}
	process["oomScoreAdj"] = json.RawMessage(strconv.Itoa(floor))
	if spec["process"], err = json.Marshal(process); err != nil {
		return false, err
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return false, err
	}
	return true, writeAtomic(path, out)
}

func writeAtomic(path string, data []byte) (err error) {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config.json.*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err = tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// injectFault fails a create whose bundle names a pod that a fault in dir
// targets: journaled, then the fault's message as runc's error.
func injectFault(dir, bundle string, args []string) error {
	if dir == "" || !isCreate(args) {
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return nil // runc reports a missing config itself
	}
	for _, f := range cniconf.ReadRuncFaults(dir) {
		if !strings.Contains(string(raw), f.PodUID) {
			continue
		}
		e := cniconf.JournalEntry{Time: time.Now(), Verb: cniconf.VerbRuncCreate, ContainerID: args[len(args)-1],
			PodUID: f.PodUID, Action: cniconf.ActionError, Step: 0, Invocation: -1, Targeted: true, PID: os.Getpid()}
		if err := cniconf.AppendJournal(f.Journal, e); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		msg := f.Msg
		if msg == "" {
			msg = "cnifault: injected runc create failure"
		}
		return errors.New(msg)
	}
	return nil
}

// isCreate tells a create from a run: only a create is faulted (a run
// would be a container the harness never asks for).
func isCreate(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if globalValueFlags[a] {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return a == "create"
		}
	}
	return false
}
