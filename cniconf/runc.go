package cniconf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// VerbRuncCreate is cmd/cnifault-runc-wrapper's journal verb: a runc create
// it was asked to run.
const VerbRuncCreate Verb = "runc create"

// RuncFaultsEnv names the dir of RuncFaults in cmd/cnifault-runc-wrapper's
// environment.
const RuncFaultsEnv = "CNIFAULT_RUNC_FAULTS"

// RuncFault makes cmd/cnifault-runc-wrapper fail `runc create` of the
// containers of one pod, before runc runs: the failure of starting a
// sandbox whose network is already up. A container is the pod's when its
// bundle's config.json names the pod's UID, as both runtimes' sandbox
// annotations do (containerd's io.kubernetes.cri.sandbox-uid, CRI-O's
// io.kubernetes.cri-o.Metadata).
type RuncFault struct {
	PodUID  string `json:"podUID"`
	Msg     string `json:"msg"`
	Journal string `json:"journal"`
}

// WriteRuncFault puts f into dir as name+".json", atomically.
func WriteRuncFault(dir, name string, f RuncFault) error {
	if name == "" || strings.ContainsRune(name, os.PathSeparator) {
		return fmt.Errorf("cniconf: runc fault name %q must be a file name", name)
	}
	if f.PodUID == "" || !filepath.IsAbs(f.Journal) {
		return fmt.Errorf("cniconf: a runc fault needs a pod UID and an absolute journal path")
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

// RemoveRuncFault removes a scenario's runc fault; a missing one is not an
// error.
func RemoveRuncFault(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name+".json"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("cniconf: %w", err)
	}
	return nil
}

// ReadRuncFaults returns every fault of dir; one that does not parse (a
// write cut short) is skipped.
func ReadRuncFaults(dir string) []RuncFault {
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []RuncFault
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var f RuncFault
		if json.Unmarshal(raw, &f) == nil && f.PodUID != "" {
			out = append(out, f)
		}
	}
	return out
}
