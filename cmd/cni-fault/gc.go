package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cnifault/cnifault/cniconf"
)

// validAttachmentsKey is the spec's name. libcni also sends the same list as
// "cni.dev/attachments", the name a typo in the spec once gave it (libcni
// #1101); that alias is accepted like every cni.dev/ key and not journaled,
// since no runtime sends one without the other.
const validAttachmentsKey = "cni.dev/valid-attachments"

// validAttachments reads GC's list as it arrived, order and duplicates kept:
// the journal must show what the runtime claimed, not a tidied set. An absent
// key or null is not refused, although the spec requires a list: libcni
// itself sends them, and a plugin that failed a GC it was not told to fail
// would inject a fault of its own. PluginConf has already refused a list of
// the wrong shape, for every verb, as host-local would.
func validAttachments(top map[string]json.RawMessage) (cniconf.AttachmentsKey, []cniconf.Attachment, error) {
	raw, ok := top[validAttachmentsKey]
	switch {
	case !ok:
		return cniconf.KeyAbsent, nil, nil
	case bytes.Equal(bytes.TrimSpace(raw), []byte("null")):
		return cniconf.KeyNull, nil, nil
	}
	var list []cniconf.Attachment
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", nil, fmt.Errorf("%s: %w", validAttachmentsKey, err)
	}
	return cniconf.KeyList, list, nil
}
