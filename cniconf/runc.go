package cniconf

import (
	"fmt"
	"path/filepath"
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
	if f.PodUID == "" || !filepath.IsAbs(f.Journal) {
		return fmt.Errorf("cniconf: a runc fault needs a pod UID and an absolute journal path")
	}
	return writeFaultFile(dir, name, f)
}

// RemoveRuncFault removes a scenario's runc fault; a missing one is not an
// error.
func RemoveRuncFault(dir, name string) error { return removeFaultFile(dir, name) }

// ReadRuncFaults returns every runc fault of dir.
func ReadRuncFaults(dir string) []RuncFault {
	return readFaultFiles(dir, func(f RuncFault) string { return f.PodUID })
}
