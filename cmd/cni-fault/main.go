// Command cni-fault is a CNI plugin that fails on command. The cnifault
// harness puts it at any position of a chain and tells it, per verb, which
// invocations should error, exit, crash, hang, stall or print garbage, so
// that a runtime's cleanup can be tested against every way a plugin breaks.
//
// Its config is cniconf.Fault; every invocation is appended to the journal
// before the plugin acts, and per-(pod, verb) invocation counters live in
// stateDir. It never touches a network namespace or any other file.
package main

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cnifault/cnifault/cniconf"
)

// supported leaves out 0.1.0 and 0.2.0, which version.All includes: their
// results must carry an IP address, so an ADD that passes without a
// prevResult could not be expressed in them.
var supported = version.VersionsStartingFrom("0.3.0")

// What make build stamps into the binary (-ldflags -X), as into cnifault:
// the release tag (empty for an untagged commit) and the commit. A report
// names the fault plugin by them (report.PluginVersions reads the about
// line), since a build of an untagged commit has no module version.
var (
	harnessVersion string
	harnessCommit  string
)

// about is the plugin's about line: "CNI cni-fault plugin v1.2.0 (commit
// 5157b43c1a2b)", what a CNI plugin prints when run without a command.
func about() string {
	s := "CNI cni-fault plugin "
	if harnessVersion != "" {
		s += harnessVersion
	} else {
		s += "devel"
	}
	if harnessCommit != "" {
		hash, dirty, _ := strings.Cut(harnessCommit, "-")
		if len(hash) > 12 {
			hash = hash[:12]
		}
		if dirty != "" {
			hash += "-" + dirty
		}
		s += " (commit " + hash + ")"
	}
	return s + ": fails on command"
}

// errorVersion is the config's cniVersion once a handler has parsed it, so
// that error objects carry it as the CNI spec asks; skel's own printer omits
// it.
var errorVersion string

func main() {
	// skel checks, after ADD and DEL return, that CNI_NETNS is not the
	// plugin's own netns and then prints a second JSON document after our
	// result. The check guards plugins that configure the namespace;
	// cni-fault never enters one, so it would only corrupt a pass.
	os.Setenv("CNI_NETNS_OVERRIDE", "1") //nolint:errcheck // cannot fail for a valid name

	e := skel.PluginMainFuncsWithError(skel.CNIFuncs{
		Add:    handler(cniconf.VerbAdd),
		Del:    handler(cniconf.VerbDel),
		Check:  handler(cniconf.VerbCheck),
		Status: handler(cniconf.VerbStatus),
		GC:     handler(cniconf.VerbGC),
	}, supported, about())
	if e != nil {
		printError(e)
		os.Exit(1)
	}
}

// printError writes the CNI error object to stdout, where runtimes read it.
func printError(e *types.Error) {
	out, err := json.MarshalIndent(struct {
		CNIVersion string `json:"cniVersion,omitempty"`
		*types.Error
	}{errorVersion, e}, "", "    ")
	if err != nil {
		return
	}
	os.Stdout.Write(append(out, '\n')) //nolint:errcheck // nowhere left to report
}
