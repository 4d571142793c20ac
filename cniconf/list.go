package cniconf

import (
	"encoding/json"
	"fmt"
)

// DefaultCNIVersion is the CNI spec version written into every list. 1.0.0 is
// understood by containerd 1.6 (libcni 1.1) and everything newer, and by the
// reference plugins pinned in go.mod.
const DefaultCNIVersion = "1.0.0"

// CNIVersion110 is the first spec version with STATUS and GC: libcni sends
// neither to an older list, and skel refuses both below it. It is not the
// default because containerd 1.6 and 1.7 vendor libcni 1.1, whose result
// types stop at 1.0.0: a 1.1.0 result fails their ADDs. libcni 1.2 and
// later (containerd 2.x, CRI-O) read it, and so do the reference plugins
// pinned in go.mod and cni-fault.
const CNIVersion110 = "1.1.0"

// Plugin is one entry of a list's "plugins" array. Each implementation
// marshals itself with its "type" field set, so a list can never name a
// plugin type that disagrees with the Go value that built it.
type Plugin interface {
	// PluginType is the CNI "type": the binary name looked up in the bin dir.
	PluginType() string
}

// NetworkList is a CNI network configuration list (a .conflist file).
type NetworkList struct {
	CNIVersion string
	Name       string
	Plugins    []Plugin
	// DisableGC is the 1.1 list key that forbids runtimes to GC the
	// network (for a network several runtimes share). libcni's
	// GCNetworkList returns at once for such a list, before it replays DEL
	// for stale cached attachments: a GC journaled for it is the runtime's
	// own doing, not libcni's.
	DisableGC bool
}

// NewList returns a list at DefaultCNIVersion.
func NewList(name string, plugins ...Plugin) NetworkList {
	return NetworkList{CNIVersion: DefaultCNIVersion, Name: name, Plugins: plugins}
}

// AtVersion returns a copy of l at cniVersion v (e.g. CNIVersion110). The
// plugins are shared: they are values a list only marshals.
func (l NetworkList) AtVersion(v string) NetworkList {
	l.CNIVersion = v
	return l
}

// MarshalJSON renders the list in the CNI conflist format.
func (l NetworkList) MarshalJSON() ([]byte, error) {
	if l.Name == "" {
		return nil, fmt.Errorf("cniconf: network list has no name")
	}
	if len(l.Plugins) == 0 {
		return nil, fmt.Errorf("cniconf: network list %q has no plugins", l.Name)
	}
	version := l.CNIVersion
	if version == "" {
		version = DefaultCNIVersion
	}
	plugins := make([]json.RawMessage, 0, len(l.Plugins))
	for i, p := range l.Plugins {
		raw, err := marshalPlugin(p)
		if err != nil {
			return nil, fmt.Errorf("cniconf: list %q plugin %d: %w", l.Name, i, err)
		}
		plugins = append(plugins, raw)
	}
	return json.Marshal(struct {
		CNIVersion string            `json:"cniVersion"`
		Name       string            `json:"name"`
		DisableGC  bool              `json:"disableGC,omitempty"`
		Plugins    []json.RawMessage `json:"plugins"`
	}{version, l.Name, l.DisableGC, plugins})
}

// Bytes is the indented conflist, as written to disk and attached to reports.
func (l NetworkList) Bytes() ([]byte, error) {
	raw, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}

// marshalPlugin merges {"type": PluginType()} into the plugin's own fields.
func marshalPlugin(p Plugin) (json.RawMessage, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("plugin %T does not marshal to a JSON object: %w", p, err)
	}
	typ, _ := json.Marshal(p.PluginType())
	fields["type"] = typ
	return json.Marshal(fields)
}
