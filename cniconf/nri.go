package cniconf

import (
	"fmt"
	"path/filepath"
)

// The NRI events cmd/cnifault-nri can be told to reject. They are Verbs so
// that its journal is cni-fault's format (JournalEntry) and every reader of
// a journal — the fault-fired check, the report's faults_fired — works on
// both; the names are NRI's own, which no CNI_COMMAND shares.
const (
	NRIRunPodSandbox    Verb = "RunPodSandbox"
	NRIStopPodSandbox   Verb = "StopPodSandbox"
	NRIRemovePodSandbox Verb = "RemovePodSandbox"
	NRICreateContainer  Verb = "CreateContainer"
	// NRISynchronize is journaled, never faulted: the line a plugin writes
	// once the runtime has registered it, which the harness waits for.
	NRISynchronize Verb = "Synchronize"
)

// NRI names cmd/cnifault-nri takes as a plugin the runtime launches: its
// index and name make the file name NRI requires in the plugin dir
// ("10-cnifault") and name its config there ("10-cnifault.conf").
const (
	NRIPluginIndex = "10"
	NRIPluginName  = "cnifault"
)

// NRIPluginFile is the plugin's file name in a runtime's NRI plugin dir.
func NRIPluginFile() string { return NRIPluginIndex + "-" + NRIPluginName }

// NRIPluginConfig is cmd/cnifault-nri's config, which the runtime hands it
// when it registers. A launched plugin gets no arguments and a bare
// environment, so everything it needs is here, as absolute paths.
type NRIPluginConfig struct {
	// FaultDir holds one NRIFault file per scenario; the plugin reads them
	// at every event, so a fault written or removed while the runtime runs
	// applies to the next event.
	FaultDir string `json:"faultDir"`
	// Journal receives a line per event the plugin sees, targeted or not.
	Journal string `json:"journal"`
	// Log receives the NRI library's own messages (registration, errors).
	Log string `json:"log,omitempty"`
}

// NRIFiles are the plugin's files in the NRI dir a runtime instance gives
// it: the harness writes the config from them and reads the journal.
func NRIFiles(dir string) NRIPluginConfig {
	return NRIPluginConfig{FaultDir: filepath.Join(dir, "faults"), Journal: filepath.Join(dir, "journal.jsonl"),
		Log: filepath.Join(dir, "plugin.log")}
}

// NRIFault is one scenario's faults for the NRI plugin: the events of one
// pod (by UID) and, per event, the steps that apply to its invocations in
// order. Error and Delay are the actions NRI can express; an error is what
// the runtime receives as the plugin's rejection.
type NRIFault struct {
	PodUID string          `json:"podUID"`
	Faults map[Verb][]Step `json:"faults"`
}

// NRIActionSupported tells whether the NRI plugin can apply a: it answers
// an RPC, so it can pass, fail, or answer late; a hang or a crash would
// take the plugin away from every pod of the runtime, not fault one.
func NRIActionSupported(a Action) bool {
	return a == ActionPass || a == ActionError || a == ActionDelay
}

// WriteNRIFault puts f into dir as name+".json", atomically.
func WriteNRIFault(dir, name string, f NRIFault) error {
	for v, steps := range f.Faults {
		for _, s := range steps {
			if !NRIActionSupported(s.Action) {
				return fmt.Errorf("cniconf: NRI fault on %s: action %q is not one the NRI plugin can apply", v, s.Action)
			}
		}
	}
	return writeFaultFile(dir, name, f)
}

// RemoveNRIFault removes a scenario's NRI fault; a missing one is not an
// error.
func RemoveNRIFault(dir, name string) error { return removeFaultFile(dir, name) }

// ReadNRIFaults returns every NRI fault of dir.
func ReadNRIFaults(dir string) []NRIFault {
	return readFaultFiles(dir, func(f NRIFault) string { return f.PodUID })
}
