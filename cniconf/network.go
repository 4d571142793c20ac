package cniconf

// Network names the per-instance resources a bridge network occupies on the
// host. Every field must be unique per runtime instance so that parallel
// harness processes, and other software on the node, never share a bridge,
// a subnet or an IPAM data dir.
type Network struct {
	// Name is the CNI network name; it doubles as the marker the harness looks
	// for in the runtime's reported CNI config.
	Name string
	// Bridge is the host bridge interface (at most 15 bytes).
	Bridge string
	// Subnet is the IPv4 CIDR pods draw addresses from.
	Subnet string
	// IPAMDataDir is host-local's dataDir.
	IPAMDataDir string
}

// BridgeList is the healthy network: one bridge plugin with host-local IPAM.
// Runtimes add loopback themselves.
func BridgeList(n Network) NetworkList {
	return NewList(n.Name, n.BridgePlugin())
}

// BridgePlugin is this network's bridge entry, the first link of custom chains.
func (n Network) BridgePlugin() Bridge {
	return Bridge{
		Bridge: n.Bridge,
		IPAM: HostLocal{
			Ranges:  [][]Range{{{Subnet: n.Subnet}}},
			DataDir: n.IPAMDataDir,
		},
	}
}
