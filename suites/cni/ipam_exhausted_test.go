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

	When("the IPAM range has no free address", Scenario("ipam-exhausted"), Label("fault:ipam"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("reserving the range's only address for another container")
			_, subnet, err := net.ParseCIDR(sc.Network.Subnet)
			Expect(err).NotTo(HaveOccurred())
			only := make(net.IP, 4)
			copy(only, subnet.IP.To4())
			only[3] = 200
			bridge := sc.Network.BridgePlugin()
			bridge.IPAM.Ranges = [][]cniconf.Range{{{Subnet: sc.Network.Subnet, RangeStart: only.String(), RangeEnd: only.String()}}}
			reservations := filepath.Join(sc.Network.IPAMDataDir, sc.Network.Name)
			Expect(os.MkdirAll(reservations, 0o755)).To(Succeed())
			// host-local's own format: container id, then the interface.
			Expect(os.WriteFile(filepath.Join(reservations, only.String()), []byte("cnifault-other-pod\r\neth0"), 0o644)).To(Succeed())

			By("installing bridge with that one-address range, then an observing cni-fault")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, bridge, sc.Fault()))
			// host-local's words when the range is full.
			sc.ExpectRuntimeError("no IP addresses available")
		}, NodeTimeout(scenarioSetupTimeout))

		itFailsAndLeavesNothing(func() *scenario { return sc })
	})
})
