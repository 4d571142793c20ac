package cni_test

import (
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
)

// nriRegisterTimeout bounds the wait for the runtime's NRI plugin to be
// registered: the runtime launches it at start and registers it within its
// plugin_registration_timeout (5 s by default in both runtimes), so this
// only covers a loaded node's scheduling on top.
const nriRegisterTimeout = 30 * time.Second

// requireNRI skips the scenario where the runtime runs no NRI plugin of
// the harness's, with the reason the runtime gave, and waits until the
// plugin is registered.
func (sc *scenario) requireNRI(ctx SpecContext) {
	GinkgoHelper()
	n, err := sc.NRI()
	if err != nil {
		Skip("the runtime runs no NRI plugin of cnifault's: " + err.Error())
	}
	Eventually(func(g Gomega) {
		_, up := sc.NRIPluginUp()
		g.Expect(up).To(BeTrue(), "the runtime's NRI plugin is not registered (no Synchronize from a live cnifault-nri in %s); its log: %s",
			n.Journal, tail(n.Log))
	}).WithContext(ctx).WithTimeout(nriRegisterTimeout).Should(Succeed())
}

// tail is the end of a file, for a message.
func tail(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(raw) > 2048 {
		raw = raw[len(raw)-2048:]
	}
	return string(raw)
}

// An NRI plugin rejects a pod after the runtime set up its network and
// started its sandbox (containerd#13355): the ADD succeeded, so the
// failed call must DEL it, and leave neither the sandbox's processes nor
// its address.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	When("an NRI plugin rejects the pod after its network is up", Scenario("nri-rejects-run"), Label("fault:nri", report.LabelManagedOnly), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			sc.requireNRI(ctx)
			By("installing bridge, observed by cni-fault, and an NRI fault (RunPodSandbox: reject)")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
			Expect(sc.SetNRIFault(cniconf.NRIRunPodSandbox, cniconf.Fail(0, "cnifault: injected NRI RunPodSandbox rejection"))).To(Succeed())
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})
})
