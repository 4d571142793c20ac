package cni_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
)

// journal is every cni-fault invocation of this scenario so far; a journal
// that cannot be read fails the spec as the harness's error.
func (sc *scenario) journal() []cniconf.JournalEntry {
	GinkgoHelper()
	entries, err := sc.Journal()
	Expect(err).NotTo(HaveOccurred(), "reading the fault journal")
	return entries
}

// stopHungPlugins kills cni-fault invocations of this scenario that are
// still hanging (scn.Scenario.StopHungPlugins), telling the spec's output.
func (sc *scenario) stopHungPlugins() { sc.StopHungPlugins(GinkgoWriter.Printf) }

// chain is the scenario's network list: bridge, then the plugins its pod
// shape needs (portmap for a hostPort pod: scn.Scenario.UsePortmap), then
// after.
func (sc *scenario) chain(after ...cniconf.Plugin) cniconf.NetworkList {
	plugins := []cniconf.Plugin{sc.Network.BridgePlugin()}
	if p := sc.Portmap(); p != nil {
		plugins = append(plugins, *p)
	}
	return cniconf.NewList(sc.Network.Name, append(plugins, after...)...)
}

// InstallHangingAdd installs bridge (and its shape's plugins), then
// cni-fault whose ADD hangs once and passes afterwards: the first call
// blocks inside ADD with an address allocated, and a retry of the same pod
// can succeed.
func (sc *scenario) InstallHangingAdd(ctx SpecContext) {
	GinkgoHelper()
	sc.InstallNetwork(ctx, sc.chain(sc.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())))
}

// InstallFaultsFileNetwork installs bridge, then a cni-fault whose config
// breaks nothing, and puts f's faults into the scenario's faults file: a
// scenario whose pods outlive the fault (a storm's retried pods, every
// attempt's sandbox) clears it there, and whatever tears those pods down
// later — restore, or `cnifault restore` after the run was killed, which
// removes the faults files first — meets a config whose DEL passes, even
// on a runtime that tears down with the config cached at ADD (CRI-O).
func (sc *scenario) InstallFaultsFileNetwork(ctx SpecContext, f cniconf.Fault) {
	GinkgoHelper()
	Expect(sc.SetFaults(f.Faults)).To(Succeed())
	sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
	sc.ExpectJournal(f, cniconf.VerbAdd)
}
