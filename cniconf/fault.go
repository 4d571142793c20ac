package cniconf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"
)

// FaultPluginType is the binary name of cmd/cni-fault in the CNI bin dir.
const FaultPluginType = "cni-fault"

// Verb is a CNI operation.
type Verb string

// The CNI operations cni-fault can be told to break. They are spelled as in
// CNI_COMMAND so a journal line and a fault map key compare directly.
const (
	VerbAdd    Verb = "ADD"
	VerbDel    Verb = "DEL"
	VerbCheck  Verb = "CHECK"
	VerbStatus Verb = "STATUS"
	VerbGC     Verb = "GC"
)

// Action is what cni-fault does on one invocation.
type Action string

// The behaviours a runtime must survive from a plugin.
const (
	// ActionPass succeeds: ADD passes prevResult through (or returns an empty
	// result), the other verbs print nothing.
	ActionPass Action = "pass"
	// ActionError prints a CNI error object and exits 1: the well-behaved way
	// to fail.
	ActionError Action = "error"
	// ActionExit exits with a status and no output, as a plugin killed by a
	// wrapper script or a panicking Go plugin would.
	ActionExit Action = "exit"
	// ActionCrash dies by a signal after the invocation is journaled.
	ActionCrash Action = "crash"
	// ActionHang never returns; only the runtime's timeout ends it.
	ActionHang Action = "hang"
	// ActionDelay sleeps, then passes: slow but correct plugins.
	ActionDelay Action = "delay"
	// ActionGarbage prints bytes that are not JSON and exits 0.
	ActionGarbage Action = "garbage"
)

// Step is one action applied to Count invocations (0: every remaining invocation).
type Step struct {
	Action  Action `json:"action"`
	Count   int    `json:"count,omitempty"`
	Code    int    `json:"code,omitempty"`    // error; 0 means 999 (ErrInternal)
	Msg     string `json:"msg,omitempty"`     // error
	Details string `json:"details,omitempty"` // error
	Status  int    `json:"status,omitempty"`  // exit; 0 means 1
	Signal  string `json:"signal,omitempty"`  // crash, e.g. "SIGSEGV"; empty means SIGKILL
	Delay   string `json:"delay,omitempty"`   // delay (Go duration)
}

// Pass is a step that succeeds.
func Pass() Step { return Step{Action: ActionPass} }

// Fail is a step that returns CNI error code with msg.
func Fail(code int, msg string) Step { return Step{Action: ActionError, Code: code, Msg: msg} }

// Exit is a step that exits with status and prints nothing. Status 0 cannot
// be expressed: it marshals as absent, which the plugin reads as 1.
func Exit(status int) Step { return Step{Action: ActionExit, Status: status} }

// Crash is a step that kills the plugin with signal ("" for SIGKILL).
func Crash(signal string) Step { return Step{Action: ActionCrash, Signal: signal} }

// Hang is a step that never returns.
func Hang() Step { return Step{Action: ActionHang} }

// Delay is a step that sleeps d, then passes.
func Delay(d time.Duration) Step { return Step{Action: ActionDelay, Delay: d.String()} }

// Garbage is a step that prints non-JSON and exits 0.
func Garbage() Step { return Step{Action: ActionGarbage} }

// Times limits the step to n invocations, so that a later step takes over.
func (s Step) Times(n int) Step {
	s.Count = n
	return s
}

// Fault is the cni-fault plugin entry of a chain. It implements Plugin
// (PluginType() == "cni-fault").
//
// Journal and StateDir must be absolute: the plugin runs with the runtime's
// working directory, and a relative path would scatter files there.
type Fault struct {
	Journal  string `json:"journal"`
	StateDir string `json:"stateDir"`
	PodUID   string `json:"podUID,omitempty"`
	// PodUIDs are more pods the fault fires for, beside PodUID: a storm's
	// pods, each counted on its own.
	PodUIDs []string        `json:"podUIDs,omitempty"`
	Faults  map[Verb][]Step `json:"faults,omitempty"`
	// FaultsFile, where set and present, holds the faults instead of
	// Faults ({"faults": {...}}), read at every invocation: a fault a
	// scenario changes while a pod lives must reach a runtime that tears
	// down with the config cached at ADD (CRI-O's ocicni), which a rewrite
	// of the conf dir never does.
	FaultsFile string `json:"faultsFile,omitempty"`
}

// FaultsFileName is the base name the harness gives a FaultsFile, so that
// `cnifault restore` can find and remove every one a killed run left.
const FaultsFileName = "faults.json"

// WriteFaults puts faults into a FaultsFile atomically: the plugin reads
// the old set or the new one, never half of one.
func WriteFaults(path string, faults map[Verb][]Step) error {
	raw, err := json.Marshal(struct {
		Faults map[Verb][]Step `json:"faults"`
	}{faults})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	return os.Rename(tmp, path)
}

// PluginType implements Plugin.
func (Fault) PluginType() string { return FaultPluginType }

// Targets reports whether the fault fires for pod: every pod when neither
// PodUID nor PodUIDs names one, else the pods they name.
func (f Fault) Targets(pod string) bool {
	if f.PodUID == "" && len(f.PodUIDs) == 0 {
		return true
	}
	return f.PodUID == pod || slices.Contains(f.PodUIDs, pod)
}

// On returns a copy of f whose sequence for v is steps; no steps removes the
// verb, which then always passes. The receiver is left untouched so a base
// Fault can be shared between specs.
func (f Fault) On(v Verb, steps ...Step) Fault {
	faults := maps.Clone(f.Faults)
	if faults == nil {
		faults = map[Verb][]Step{}
	}
	if len(steps) == 0 {
		delete(faults, v)
	} else {
		faults[v] = slices.Clone(steps)
	}
	f.Faults = faults
	return f
}

// JournalEntry is one line of the plugin's journal: one invocation, written
// before the action runs so that crashes and hangs are recorded too.
type JournalEntry struct {
	Time        time.Time `json:"time"`
	Verb        Verb      `json:"verb"`
	ContainerID string    `json:"container_id"`
	Netns       string    `json:"netns"`
	IfName      string    `json:"ifname"`
	PodUID      string    `json:"pod_uid"`
	Action      Action    `json:"action"`
	// Step is the index of the sequence step that applied, -1 when none did
	// (untargeted pod, verb without steps, or past the end of the sequence).
	Step int `json:"step"`
	// Invocation counts this (pod, verb) pair's invocations from 0; -1 when
	// the config has no stateDir to count in.
	Invocation int  `json:"invocation"`
	Targeted   bool `json:"targeted"`
	PID        int  `json:"pid"`
	// ValidAttachments is the list a GC received, in the runtime's order: a
	// judge compares it with the pods the runtime still holds, and a missing
	// or extra entry is what makes a GC reclaim a live pod or keep a leak.
	// It is empty but not nil for [], nil for null or no key (then
	// ValidAttachmentsKey tells which); omitzero keeps [] apart from nil on
	// disk and leaves the other verbs' lines as they were.
	ValidAttachments []Attachment `json:"valid_attachments,omitzero"`
	// ValidAttachmentsKey is how the list arrived on a GC; empty on the other
	// verbs.
	ValidAttachmentsKey AttachmentsKey `json:"valid_attachments_key,omitempty"`
}

// ReadJournal parses a journal file; a missing file is an empty journal,
// since the plugin creates it only when first invoked.
func ReadJournal(path string) ([]JournalEntry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cniconf: %w", err)
	}
	defer f.Close()
	var entries []JournalEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return entries, fmt.Errorf("cniconf: %s line %d: %w", path, line, err)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return entries, fmt.Errorf("cniconf: %s: %w", path, err)
	}
	return entries, nil
}

// Firing is the step of v that a scenario relies on: the first one that does
// not pass. A scenario's verdict means something only once the journal shows
// this step applied to the scenario's pod. ok is false when every step of v
// passes (or v has none): then nothing is injected on v.
func (f Fault) Firing(v Verb) (index int, step Step, ok bool) {
	for i, s := range f.Faults[v] {
		if s.Action != ActionPass && s.Action != ActionDelay {
			return i, s, true
		}
	}
	return -1, Step{}, false
}

// Fired reports whether this invocation applied an injected fault: a
// targeted invocation whose step broke the call. A pass or a delay does not
// count; neither does an invocation past the end of its sequence.
func (e JournalEntry) Fired() bool {
	return e.Targeted && e.Step >= 0 && e.Action != ActionPass && e.Action != ActionDelay
}

// String is how a report names a fired fault: "ADD error (step 0)".
func (e JournalEntry) String() string {
	return fmt.Sprintf("%s %s (step %d)", e.Verb, e.Action, e.Step)
}
