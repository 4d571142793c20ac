package cni_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Fault returns the scenario's cni-fault plugin entry: it journals every
// invocation into the scenario's dir and fires only for the scenario's pod,
// so pods of other scenarios or of the node pass through untouched.
func (sc *scenario) Fault() cniconf.Fault {
	return cniconf.Fault{
		Journal:  sc.journalPath(),
		StateDir: filepath.Join(sc.faultDir(), "state"),
		PodUID:   sc.PodConfig().GetMetadata().GetUid(),
	}
}

func (sc *scenario) faultDir() string { return sc.names.FaultDir(rt.WorkDir()) }

func (sc *scenario) journalPath() string { return filepath.Join(sc.faultDir(), "journal.jsonl") }

// Journal is every cni-fault invocation of this scenario so far.
func (sc *scenario) Journal() []cniconf.JournalEntry {
	GinkgoHelper()
	entries, err := cniconf.ReadJournal(sc.journalPath())
	Expect(err).NotTo(HaveOccurred(), "reading the fault journal")
	return entries
}

// observesCNI reports whether the installed chain has a cni-fault entry to
// see the runtime's CNI calls with.
func observesCNI(l cniconf.NetworkList) bool {
	return slices.ContainsFunc(l.Plugins, func(p cniconf.Plugin) bool {
		return p.PluginType() == cniconf.FaultPluginType
	})
}

// delAfterFailedAdd answers from the journal whether the runtime sent DEL
// after the failed call (verdict.DelAfterFailedAdd); a journal that cannot
// be read then fails the spec as the harness's error.
func (sc *scenario) delAfterFailedAdd() *bool {
	return verdict.DelAfterFailedAdd(sc.runErr, sc.observed, sc.Journal, sc.PodConfig().GetMetadata().GetUid(), sc.runStarted)
}

// stopHungPlugins kills cni-fault invocations of this scenario that are
// still hanging: a runtime that was killed or never timed its plugin out
// leaves them behind. Each pid comes from the journal and is checked to be
// the harness's own plugin binary before it is signalled.
func (sc *scenario) stopHungPlugins() {
	entries, _ := cniconf.ReadJournal(sc.journalPath())
	plugin, _ := filepath.EvalSymlinks(filepath.Join(rt.CNIBinDir(), cniconf.FaultPluginType))
	for _, e := range entries {
		if e.Action != cniconf.ActionHang || !host.Alive(e.PID) {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", e.PID))
		if err != nil || exe != plugin {
			continue
		}
		GinkgoWriter.Printf("stopping hung cni-fault pid %d (%s %s)\n", e.PID, e.Verb, e.ContainerID)
		_ = host.Kill(e.PID, syscall.SIGKILL)
	}
}

// InstallHangingAdd installs bridge, then cni-fault whose ADD hangs once and
// passes afterwards: the first call blocks inside ADD with an address
// allocated, and a retry of the same pod can succeed.
func (sc *scenario) InstallHangingAdd(ctx SpecContext) {
	GinkgoHelper()
	sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name,
		sc.Network.BridgePlugin(), sc.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())))
}
