package cni_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// A dual-stack network whose IPv6 range is full: host-local
// (plugins v1.10.0, plugins/ipam/host-local/main.go cmdAdd) allocates from
// each range set in order, so the pod's IPv4 address is taken before the
// IPv6 range fails ("failed to allocate for range 1: no IP addresses
// available in range set: <start>-<end>"), inside bridge's ADD after bridge
// made the veth. The failed call must leave no IPv4 lease, nor anything
// else. The IPv6 range's one address is held by a healthy dual-stack pod
// of the scenario started first, which is also what shows that the kernel
// and the runtime can do IPv6 here: where they cannot, the scenario is
// skipped with the reason, never passed.
var _ = Describe("RunPodSandbox on a dual-stack network", func() {
	var sc *scenario

	When("the IPv6 range has no free address while the IPv4 range has", KubeletScenario("dual-stack-partial", kubeletCase{
		family: kubeletFirstAttempt, holder: true,
		chain: func(k *scenario) (cniconf.NetworkList, error) {
			return cniconf.NewList(k.Network.Name, k.dualStackBridge(), k.Fault()), nil
		},
		expects: func(k *scenario) {
			_, only6 := ipv6Range(k.Network.Subnet)
			k.ExpectRuntimeError(fmt.Sprintf("failed to allocate for range 1: no IP addresses available in range set: %s-%s", only6, only6))
		},
	}), Label("fault:ipam", "fault:dual-stack", report.NeedsLabel(report.NeedIPv6)), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
				skipLacking(report.NeedIPv6, "the kernel has no IPv6 (/proc/sys/net/ipv6 is absent: built without it, or booted with ipv6.disable=1)")
			}
			_, only6 := ipv6Range(sc.Network.Subnet)

			By("installing bridge with an IPv4 range and a one-address IPv6 range, then an observing cni-fault")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.dualStackBridge(), sc.Fault()))

			By("starting a healthy dual-stack pod, which takes the IPv6 range's only address")
			sc.startDualStackHolder(ctx, only6)
			// host-local's words for the IPv6 range set (index 1) being
			// full, after the IPv4 one (index 0) allocated.
			sc.ExpectRuntimeError(fmt.Sprintf("failed to allocate for range 1: no IP addresses available in range set: %s-%s", only6, only6))
		}, NodeTimeout(scenarioSetupTimeout))

		itFailsAndLeavesNothing(func() *scenario { return sc })
	})
})

// dualStackBridge is the scenario's bridge with its IPv4 range and a
// one-address IPv6 range (ipv6Range).
func (sc *scenario) dualStackBridge() cniconf.Bridge {
	subnet6, only6 := ipv6Range(sc.Network.Subnet)
	bridge := sc.Network.BridgePlugin()
	bridge.IPAM.Ranges = append(bridge.IPAM.Ranges, []cniconf.Range{{Subnet: subnet6, RangeStart: only6, RangeEnd: only6}})
	return bridge
}

// ipv6Range is the scenario's IPv6 subnet beside its IPv4 one, 10.250.N.0/24
// (scn.ScenarioNames.Network): fd63:6e66:N::/64 ("cnf" in ULA space), as
// distinct between processes and runs as N is, and the one address of its
// range, in host-local's canonical spelling (net.IP.String), which names
// its lease file and its error.
func ipv6Range(subnet4 string) (subnet, only string) {
	GinkgoHelper()
	_, n4, err := net.ParseCIDR(subnet4)
	Expect(err).NotTo(HaveOccurred())
	ip := net.ParseIP(fmt.Sprintf("fd63:6e66:%x::", n4.IP.To4()[2]))
	Expect(ip).NotTo(BeNil())
	_, n6, err := net.ParseCIDR(ip.String() + "/64")
	Expect(err).NotTo(HaveOccurred())
	addr := make(net.IP, net.IPv6len)
	copy(addr, n6.IP)
	addr[15] = 2
	return n6.String(), addr.String()
}

// startDualStackHolder runs a healthy pod of the scenario (not the one
// under test) on the installed dual-stack list, and checks that host-local
// gave it the IPv6 range's only address only6. On a node's own runtime the
// node's pods start on the scenario's list too (the only one the runtime
// has loaded), and one may take only6 first: once that pod is Ready with
// the address, the range is full all the same and IPv6 works here; if its
// start gives the address back, the dual-stack pod tries again. Otherwise
// a start that fails on its IPv6 address (the pod's netns refuses IPv6:
// disable_ipv6, a runtime that sets it) skips the scenario with the
// runtime's words; any other failure is the harness's. The pod stays until
// the spec is over.
func (sc *scenario) startDualStackHolder(ctx SpecContext, only6 string) {
	GinkgoHelper()
	lease := filepath.Join(sc.Network.IPAMDataDir, sc.Network.Name, only6)
	taken := fmt.Sprintf("no IP addresses available in range set: %s-%s", only6, only6)
	for attempt := uint32(0); ; attempt++ {
		id, err := sc.RunPod(ctx, scn.Within(criCallTimeout), sc.PodConfigOf(1, attempt))
		if err == nil {
			removeAfterSpec(id)
			raw, err := os.ReadFile(lease)
			Expect(err).NotTo(HaveOccurred(), "host-local holds no lease of the IPv6 range's only address for the dual-stack pod")
			Expect(strings.SplitN(string(raw), "\n", 2)[0]).To(HavePrefix(id), "the IPv6 lease %s is not the dual-stack pod's", lease)
			return
		}
		sc.Error = "" // the holder's error is not the call under test's
		msg := strings.Join(strings.Fields(err.Error()), " ")
		if strings.Contains(msg, taken) {
			Expect(attempt+1).To(BeNumerically("<", holderAttempts),
				"other pods' starts took the IPv6 range's only address %s and gave it back %d times: %s", only6, holderAttempts, msg)
			if other := sc.awaitLeaseHolder(ctx, lease, only6); other != "" {
				GinkgoWriter.Printf("another pod of the runtime's, sandbox %s, holds the IPv6 range's only address %s (the dual-stack pod's start: %s)\n", other, only6, msg)
				return
			}
			continue
		}
		if strings.Contains(msg, only6) || strings.Contains(strings.ToLower(msg), "ipv6") {
			Skip("the runtime could not start a dual-stack pod here: " + msg)
		}
		Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network (the dual-stack pod that holds the IPv6 range's address)")
	}
}

// holderAttempts bounds the dual-stack pod's starts that find the IPv6
// range's address taken by another pod whose start then gives it back.
const holderAttempts = 3

// awaitLeaseHolder waits, within kubelet's deadline for the other pod's
// RunPodSandbox, until the pod that holds addr's lease (host-local's lease
// file names it: its first line is the CNI container id, the CRI sandbox
// id) is Ready with addr, and returns its sandbox id; "" once the lease is
// gone, the other pod's start having given the address back.
func (sc *scenario) awaitLeaseHolder(ctx SpecContext, lease, addr string) string {
	GinkgoHelper()
	var holder string
	Eventually(func(g Gomega) {
		holder = ""
		raw, err := os.ReadFile(lease)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		id := strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])
		st, err := rt.CRI().PodSandboxStatus(ctx, id)
		g.Expect(err).NotTo(HaveOccurred(), "the sandbox %s that holds %s's lease", id, addr)
		g.Expect(st.GetState()).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY), "the sandbox %s that holds %s's lease", id, addr)
		ips := []string{st.GetNetwork().GetIp()}
		for _, ip := range st.GetNetwork().GetAdditionalIps() {
			ips = append(ips, ip.GetIp())
		}
		g.Expect(slices.ContainsFunc(ips, func(ip string) bool { return net.ParseIP(ip).Equal(net.ParseIP(addr)) })).
			To(BeTrue(), "the sandbox %s holds %s's lease but has %v", id, addr, ips)
		holder = id
	}).WithContext(ctx).WithTimeout(criCallTimeout).WithPolling(pollInterval).Should(Succeed(),
		"the pod that took the IPv6 range's only address neither became Ready with it nor gave it back")
	return holder
}
