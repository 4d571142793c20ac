package main

import (
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cnifault/cnifault/cniconf"
)

// garbage is what the garbage action prints: plainly not JSON, newline
// terminated so it reads well in a runtime's log.
const garbage = "this is not json\n"

// handler runs one verb: count the invocation, journal it, then act. The
// order matters: the journal line must exist before an action that never
// returns.
func handler(verb cniconf.Verb) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		// Errors carry the config's version even when the rest is invalid.
		if v, err := (&version.ConfigDecoder{}).Decode(args.StdinData); err == nil {
			errorVersion = v
		}
		conf, cerr := parseConfig(args.StdinData)
		if cerr != nil {
			return cerr
		}
		pod := podUID(args.Args)
		// STATUS and GC concern the whole node and carry no pod, so pod
		// targeting cannot apply to them.
		nodeVerb := verb == cniconf.VerbStatus || verb == cniconf.VerbGC
		targeted := nodeVerb || conf.Targets(pod)

		n := -1
		if conf.StateDir != "" {
			var err error
			if n, err = nextInvocation(counterPath(conf.StateDir, verb, pod)); err != nil {
				return types.NewError(types.ErrIOFailure, "cni-fault: "+err.Error(), "")
			}
		}
		idx, step := -1, cniconf.Pass()
		if targeted && n >= 0 {
			idx, step = cniconf.Pick(conf.Faults[verb], n)
		}
		entry := cniconf.JournalEntry{
			Time:        time.Now(),
			Verb:        verb,
			ContainerID: args.ContainerID,
			Netns:       args.Netns,
			IfName:      args.IfName,
			PodUID:      pod,
			Action:      step.Action,
			Step:        idx,
			Invocation:  n,
			Targeted:    targeted,
			PID:         os.Getpid(),
		}
		if verb == cniconf.VerbGC {
			entry.ValidAttachmentsKey, entry.ValidAttachments = conf.attachmentsKey, conf.attachments
		}
		if err := cniconf.AppendJournal(conf.Journal, entry); err != nil {
			return types.NewError(types.ErrIOFailure, "cni-fault: journal: "+err.Error(), "")
		}
		return act(verb, step, conf)
	}
}

// act performs a validated step. Actions that must not produce skel's output
// (exit, crash, hang) never return.
func act(verb cniconf.Verb, step cniconf.Step, conf *config) error {
	switch step.Action {
	case cniconf.ActionError:
		code, msg := uint(step.Code), step.Msg
		if code == 0 {
			code = types.ErrInternal
		}
		if msg == "" {
			msg = fmt.Sprintf("cni-fault: injected %s error", verb)
		}
		return types.NewError(code, msg, step.Details)
	case cniconf.ActionExit:
		status := step.Status
		if status == 0 {
			status = 1
		}
		os.Exit(status)
	case cniconf.ActionCrash:
		sig, _ := parseSignal(step.Signal)
		dieBySignal(sig)
	case cniconf.ActionHang:
		// Not select{}: with no other goroutine the Go runtime would
		// report a deadlock and exit 2, which is a different fault.
		for {
			time.Sleep(time.Hour)
		}
	case cniconf.ActionDelay:
		d, _ := parseDelay(step.Delay)
		time.Sleep(d)
	case cniconf.ActionGarbage:
		_, err := os.Stdout.WriteString(garbage)
		return err
	}
	return pass(verb, conf)
}

// pass succeeds without touching anything. ADD must still print a result: in
// a chain it hands prevResult on to the next plugin, and alone it reports an
// attachment with no interfaces or addresses.
//
// STATUS and GC pass with no output and call nobody. The spec's duty to pass
// them on (SPEC.md, STATUS and GC) concerns a plugin's own delegates, such as
// bridge's IPAM, and cni-fault has none; the other plugins of the chain get
// their STATUS and GC from libcni, which calls every plugin of the list
// itself (libcni/api.go GetStatusNetworkList and GCNetworkList, cni v1.3.1).
func pass(verb cniconf.Verb, conf *config) error {
	if verb != cniconf.VerbAdd {
		return nil
	}
	result := conf.PrevResult
	if result == nil {
		result = &current.Result{CNIVersion: current.ImplementedSpecVersion}
	}
	if err := types.PrintResult(result, conf.CNIVersion); err != nil {
		return types.NewError(types.ErrInternal, "cni-fault: "+err.Error(), "")
	}
	return nil
}
