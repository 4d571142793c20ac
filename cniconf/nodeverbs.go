package cniconf

// The CNI 1.1 verbs STATUS and GC concern a network as a whole, not an
// attachment: a runtime sends them with no container, netns, ifname or
// CNI_ARGS, so cni-fault counts them per node ("_node-STATUS") and a pod
// target never exempts them.
//
// libcni sends both only to lists at CNIVersion110 or later, and then to every
// plugin of the list itself (GetStatusNetworkList stops at the first error,
// GCNetworkList goes on and joins them): cni-fault, which delegates to no
// plugin, need not pass either on.
//
// With the reference plugins pinned in go.mod (v1.10.0), bridge passes STATUS
// on to its IPAM, and host-local, which has no STATUS, passes it; bridge has
// no GC and does not pass GC on, so host-local's own GC of reservations never
// runs in the harness's chains. What frees an address on a GC is libcni's
// replay of DEL for every cached attachment missing from the list, which
// needs the attachment's cache entry.

// STATUS error codes the CNI 1.1 spec defines. A runtime is meant to tell a
// plugin that cannot take new ADDs from one whose existing pods may already
// be cut off, so a scenario names which it injects.
const (
	CodePluginNotAvailable  = 50
	CodeLimitedConnectivity = 51
)

// Attachment is one entry of GC's cni.dev/valid-attachments: an attachment
// the runtime still holds, named by the CNI_CONTAINERID and CNI_IFNAME of its
// ADD. The JSON keys are the spec's, so a journal line quotes the list as the
// plugin received it.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

// AttachmentsKey is how cni.dev/valid-attachments arrived on a GC. The spec
// requires the key and makes it a list, an empty one meaning that every
// attachment of the network is stale; libcni, though, sends no key when the
// runtime gives GCNetworkList no GCArgs, and null when GCArgs holds a nil
// list (ocicni's for a network with no valid pod left). Plugins decode both
// as an empty list, yet they are different runtime behaviours, so the journal
// keeps them apart rather than fold them into one.
type AttachmentsKey string

// How the key arrived.
const (
	KeyList   AttachmentsKey = "list"
	KeyNull   AttachmentsKey = "null"
	KeyAbsent AttachmentsKey = "absent"
)
