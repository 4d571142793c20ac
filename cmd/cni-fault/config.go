package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/cniconf"
)

// config is the plugin's stdin. The fault fields are parsed with cniconf's own
// types so the harness and the plugin can never disagree on a JSON tag.
type config struct {
	types.PluginConf
	cniconf.Fault
	// attachmentsKey and attachments are GC's valid-attachments as they
	// arrived, for the journal.
	attachmentsKey cniconf.AttachmentsKey
	attachments    []cniconf.Attachment
}

// parseConfig decodes and validates stdin. Validation is strict because a
// mistyped fault that silently passed would turn a failing scenario green.
func parseConfig(stdin []byte) (*config, *types.Error) {
	var c config
	if err := json.Unmarshal(stdin, &c.PluginConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cni-fault: "+err.Error(), "")
	}
	if err := json.Unmarshal(stdin, &c.Fault); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cni-fault: "+err.Error(), "")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &top); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cni-fault: "+err.Error(), "")
	}
	if err := checkKeys(top); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "cni-fault: "+err.Error(), "")
	}
	var err error
	if c.attachmentsKey, c.attachments, err = validAttachments(top); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cni-fault: "+err.Error(), "")
	}
	if err := c.readFaultsFile(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "cni-fault: "+err.Error(), "")
	}
	if c.CNIVersion == "" {
		// What skel assumes for a config without a version.
		c.CNIVersion = "0.1.0"
	}
	if err := version.ParsePrevResult(&c.PluginConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cni-fault: "+err.Error(), "")
	}
	if err := c.validate(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "cni-fault: "+err.Error(), "")
	}
	return &c, nil
}

// cniKeys are the top-level keys a runtime may send a plugin besides the
// fault's own: the CNI spec's plugin configuration keys and what libcni
// injects (name, cniVersion, prevResult, runtimeConfig). Keys under
// "cni.dev/" are the spec's reserved namespace (GC's valid-attachments).
var cniKeys = map[string]bool{
	"cniVersion": true, "name": true, "type": true, "args": true, "ipMasq": true, "ipam": true,
	"dns": true, "prevResult": true, "runtimeConfig": true, "capabilities": true,
	"journal": true, "stateDir": true, "podUID": true, "podUIDs": true, "faults": true, "faultsFile": true,
}

// checkKeys refuses keys neither the CNI spec nor the fault defines, at the
// top level and inside every step: a misspelt "count" or "faults" would
// otherwise be dropped by the decoder and the fault silently never fire.
func checkKeys(top map[string]json.RawMessage) error {
	for k := range top {
		if !cniKeys[k] && !strings.HasPrefix(k, "cni.dev/") {
			return fmt.Errorf("unknown key %q in the plugin config", k)
		}
	}
	raw, ok := top["faults"]
	if !ok {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var faults map[cniconf.Verb][]cniconf.Step
	if err := dec.Decode(&faults); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}

func (c *config) validate() error {
	if c.Journal != "" && !filepath.IsAbs(c.Journal) {
		return fmt.Errorf("journal %q is not absolute", c.Journal)
	}
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("stateDir %q is not absolute", c.StateDir)
	}
	for verb, steps := range c.Faults {
		switch verb {
		case cniconf.VerbAdd, cniconf.VerbDel, cniconf.VerbCheck, cniconf.VerbStatus, cniconf.VerbGC:
		default:
			return fmt.Errorf("faults: unknown verb %q", verb)
		}
		if len(steps) > 0 && c.StateDir == "" {
			return fmt.Errorf("faults for %s need a stateDir to count invocations in", verb)
		}
		for i, s := range steps {
			if err := validateStep(s); err != nil {
				return fmt.Errorf("faults.%s[%d]: %w", verb, i, err)
			}
		}
	}
	return nil
}

func validateStep(s cniconf.Step) error {
	if s.Count < 0 {
		return fmt.Errorf("negative count %d", s.Count)
	}
	switch s.Action {
	case cniconf.ActionPass, cniconf.ActionHang, cniconf.ActionGarbage:
	case cniconf.ActionError:
		if s.Code < 0 {
			return fmt.Errorf("negative error code %d", s.Code)
		}
	case cniconf.ActionExit:
		if s.Status < 0 || s.Status > 255 {
			return fmt.Errorf("exit status %d out of range", s.Status)
		}
	case cniconf.ActionCrash:
		if _, err := parseSignal(s.Signal); err != nil {
			return err
		}
	case cniconf.ActionDelay:
		if _, err := parseDelay(s.Delay); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown action %q", s.Action)
	}
	return nil
}

// nonFatal are the signals whose default action does not end the process: a
// crash step naming one would stop or ignore instead of crashing.
var nonFatal = map[syscall.Signal]bool{
	unix.SIGCHLD: true, unix.SIGCONT: true, unix.SIGURG: true, unix.SIGWINCH: true,
	unix.SIGSTOP: true, unix.SIGTSTP: true, unix.SIGTTIN: true, unix.SIGTTOU: true,
}

// parseSignal accepts "SIGSEGV", "segv" or "11"; empty is SIGKILL.
func parseSignal(name string) (syscall.Signal, error) {
	name = strings.ToUpper(strings.TrimSpace(name))
	var sig syscall.Signal
	switch n, err := strconv.Atoi(name); {
	case name == "":
		sig = unix.SIGKILL
	case err == nil:
		sig = syscall.Signal(n)
	case strings.HasPrefix(name, "SIG"):
		sig = unix.SignalNum(name)
	default:
		sig = unix.SignalNum("SIG" + name)
	}
	if sig <= 0 || sig > 64 {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	if nonFatal[sig] {
		return 0, fmt.Errorf("signal %s does not terminate a process", unix.SignalName(sig))
	}
	return sig, nil
}

func parseDelay(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("delay step without a delay")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("negative delay %s", s)
	}
	return d, nil
}

// podUID extracts K8S_POD_UID from CNI_ARGS. It is parsed by hand because
// types.LoadArgs rejects values containing '=' and the whole invocation with
// them, and a fault plugin must not fail on input it was not told to fail on.
func podUID(cniArgs string) string {
	for _, pair := range strings.Split(cniArgs, ";") {
		if k, v, ok := strings.Cut(pair, "="); ok && k == "K8S_POD_UID" {
			return v
		}
	}
	return ""
}

// readFaultsFile replaces the config's faults with the FaultsFile's, where
// it exists, with the same strictness: unknown keys are refused.
func (c *config) readFaultsFile() error {
	if c.FaultsFile == "" {
		return nil
	}
	raw, err := os.ReadFile(c.FaultsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return fmt.Errorf("faultsFile %s: %w", c.FaultsFile, err)
	}
	for k := range top {
		if k != "faults" {
			return fmt.Errorf("faultsFile %s: unknown key %q", c.FaultsFile, k)
		}
	}
	if err := checkKeys(map[string]json.RawMessage{"faults": top["faults"]}); err != nil {
		return fmt.Errorf("faultsFile %s: %w", c.FaultsFile, err)
	}
	var f struct {
		Faults map[cniconf.Verb][]cniconf.Step `json:"faults"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("faultsFile %s: %w", c.FaultsFile, err)
	}
	c.Faults = f.Faults
	return nil
}
