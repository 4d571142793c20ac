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

// InstallHangingAdd installs bridge, then cni-fault whose ADD hangs once and
// passes afterwards: the first call blocks inside ADD with an address
// allocated, and a retry of the same pod can succeed.
func (sc *scenario) InstallHangingAdd(ctx SpecContext) {
	GinkgoHelper()
	sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name,
		sc.Network.BridgePlugin(), sc.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())))
}
