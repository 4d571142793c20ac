package cni_test

import (
	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/cniconf"
)

// missingPlugin is a plugin type no bin dir has.
const missingPlugin = "cnifault-not-installed"

// Broken configuration: what a half-finished CNI rollout leaves on a node.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario

	When("the CNI config dir holds only invalid JSON", KubeletScenario("malformed-cni-config", kubeletCase{
		family: kubeletNoNetwork, conf: []byte("{ \"cniVersion\": \"1.0.0\", \"name\": \n"),
	}), Label("fault:config"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("writing a conflist that is not JSON until the runtime has no usable network")
			sc.InstallMalformed(ctx, []byte("{ \"cniVersion\": \"1.0.0\", \"name\": \n"))
		}, NodeTimeout(scenarioSetupTimeout))

		itFailsAndLeavesNothingWithin(func() *scenario { return sc }, mayBlockDeadline)
	})

	// The chain's last plugin is not installed, as when portmap is missing
	// from the bin dir: ADD fails after bridge allocated an address, and DEL
	// (reverse order) fails on the missing binary before reaching bridge. A
	// runtime that validates a list's plugins when it loads it (CRI-O)
	// refuses the list instead, and is then not ready, as with no config at
	// all. Either way the fault fired only where the call met it: its error,
	// or the runtime's log for the pod, names the missing binary, or says
	// that the refused list left no network (scenario.ExpectRefusal);
	// CRI-O's refusal alone, logged at load, is no proof of the call.
	When("the chain names a plugin missing from the bin dir", KubeletScenario("missing-plugin-binary", kubeletCase{
		family: kubeletFirstAttempt, refusable: missingPlugin,
		chain: func(k *scenario) (cniconf.NetworkList, error) {
			return cniconf.NewList(k.Network.Name, k.Network.BridgePlugin(), cniconf.Opaque{Type: missingPlugin}, k.Fault()), nil
		},
		expects: func(k *scenario) { k.ExpectRuntimeError(missingPlugin) },
	}), Label("fault:config"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge followed by a plugin type that has no binary")
			sc.InstallNetworkOrRefusal(ctx, cniconf.NewList(sc.Network.Name,
				sc.Network.BridgePlugin(),
				cniconf.Opaque{Type: missingPlugin},
				sc.Fault()), missingPlugin)
			sc.ExpectRuntimeError(missingPlugin)
		}, NodeTimeout(scenarioSetupTimeout))

		itFailsAndLeavesNothingWithin(func() *scenario { return sc }, mayBlockDeadline)
	})
})
