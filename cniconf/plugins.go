package cniconf

// Bridge is the reference bridge plugin with a host-local IPAM block.
//
// IsGateway stays false by default: the harness only needs addresses to be
// allocated, and a gateway address on the bridge would add a host route that
// could collide with another harness run or with the node's own networks.
type Bridge struct {
	Bridge      string    `json:"bridge"`
	IsGateway   bool      `json:"isGateway,omitempty"`
	IPMasq      bool      `json:"ipMasq,omitempty"`
	HairpinMode bool      `json:"hairpinMode,omitempty"`
	IPAM        HostLocal `json:"ipam"`
}

// PluginType implements Plugin.
func (Bridge) PluginType() string { return "bridge" }

// HostLocal is the host-local IPAM plugin. DataDir is where it keeps one file
// per reserved address; the harness points it inside its own work dir so that
// reservations are inspectable and never mix with the node's.
type HostLocal struct {
	Ranges  [][]Range `json:"ranges"`
	DataDir string    `json:"dataDir"`
}

// MarshalJSON adds the "type" field: host-local is nested, not a list entry.
func (h HostLocal) MarshalJSON() ([]byte, error) {
	type plain HostLocal
	return marshalPlugin(hostLocalPlugin(plain(h)))
}

type hostLocalPlugin HostLocal

func (hostLocalPlugin) PluginType() string { return "host-local" }

// Range is one host-local address range.
type Range struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
}

// Loopback is the reference loopback plugin.
type Loopback struct{}

// PluginType implements Plugin.
func (Loopback) PluginType() string { return "loopback" }

// Portmap is the reference portmap plugin, with the portMappings capability
// enabled as kubelet-managed nodes have it (NewPortmap).
type Portmap struct {
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	// Backend is where portmap writes a pod's DNAT and SNAT rules:
	// PortmapIPTables (per-pod CNI-DN-* chains under the shared
	// CNI-HOSTPORT-* ones, through the iptables binary) or PortmapNFTables
	// (rules commented with the container id in its own "cni_hostport"
	// table, plugins v1.5.0 on); "" lets portmap pick (iptables unless
	// only nftables is there).
	Backend string `json:"backend,omitempty"`
}

// portmap's backends (plugins/meta/portmap main.go ensureBackend).
const (
	PortmapIPTables = "iptables"
	PortmapNFTables = "nftables"
)

// NewPortmap is portmap with the portMappings capability, which a runtime
// needs to see before it passes a pod's port mappings, writing through
// backend.
func NewPortmap(backend string) Portmap {
	return Portmap{Capabilities: map[string]bool{"portMappings": true}, Backend: backend}
}

// PluginType implements Plugin.
func (Portmap) PluginType() string { return "portmap" }

// Opaque is a plugin of any type with arbitrary extra fields: a chain entry
// naming a binary that is not installed, or a third-party plugin.
type Opaque struct {
	Type   string
	Fields map[string]any
}

// PluginType implements Plugin.
func (o Opaque) PluginType() string { return o.Type }

// MarshalJSON renders the extra fields; the list adds "type".
func (o Opaque) MarshalJSON() ([]byte, error) {
	if o.Fields == nil {
		return []byte("{}"), nil
	}
	return jsonMarshal(o.Fields)
}
