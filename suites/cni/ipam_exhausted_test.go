package cni_test

import (
	"net"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
)

// An IPAM range with no free address: host-local fails inside bridge's ADD
// after bridge created the veth.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario

	When("the IPAM range has no free address", KubeletScenario("ipam-exhausted", kubeletCase{
		family: kubeletFirstAttempt,
		chain: func(k *scenario) (cniconf.NetworkList, error) {
			bridge, err := k.exhaustedBridge()
			return cniconf.NewList(k.Network.Name, bridge, k.Fault()), err
		},
		expects: func(k *scenario) { k.ExpectRuntimeError("no IP addresses available") },
	}), Label("fault:ipam"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("reserving the range's only address for another container")
			bridge, err := sc.exhaustedBridge()
			Expect(err).NotTo(HaveOccurred())

			By("installing bridge with that one-address range, then an observing cni-fault")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, bridge, sc.Fault()))
			// host-local's words when the range is full.
			sc.ExpectRuntimeError("no IP addresses available")
		}, NodeTimeout(scenarioSetupTimeout))

		itFailsAndLeavesNothing(func() *scenario { return sc })
	})
})

// exhaustedBridge is the scenario's bridge with a one-address range whose
// only address host-local's reservations give to another container.
func (sc *scenario) exhaustedBridge() (cniconf.Bridge, error) {
	bridge := sc.Network.BridgePlugin()
	_, subnet, err := net.ParseCIDR(sc.Network.Subnet)
	if err != nil {
		return bridge, err
	}
	only := make(net.IP, 4)
	copy(only, subnet.IP.To4())
	only[3] = 200
	bridge.IPAM.Ranges = [][]cniconf.Range{{{Subnet: sc.Network.Subnet, RangeStart: only.String(), RangeEnd: only.String()}}}
	reservations := filepath.Join(sc.Network.IPAMDataDir, sc.Network.Name)
	if err := os.MkdirAll(reservations, 0o755); err != nil {
		return bridge, err
	}
	// host-local's own format: container id, then the interface.
	return bridge, os.WriteFile(filepath.Join(reservations, only.String()), []byte("cnifault-other-pod\r\neth0"), 0o644)
}
