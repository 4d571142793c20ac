package cniconf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

// A scenario on STATUS or GC needs the harness's chain at 1.1.0, in the
// shape libcni reads, and NewList's default left as it was.
func TestListAtCNIVersion110(t *testing.T) {
	fault := Fault{Journal: "/abs/j", StateDir: "/abs/s"}.
		On(VerbStatus, Fail(CodePluginNotAvailable, "down")).
		On(VerbGC, Crash("").Times(1))
	base := NewList("cnifault-11", testNetwork("/d").BridgePlugin(), fault)
	l := base.AtVersion(CNIVersion110)
	if base.CNIVersion != DefaultCNIVersion || DefaultCNIVersion != "1.0.0" {
		t.Fatalf("AtVersion changed the base list (%s) or the default moved (%s)", base.CNIVersion, DefaultCNIVersion)
	}
	raw, err := l.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatalf("libcni rejects the list: %v\n%s", err, raw)
	}
	if list.CNIVersion != "1.1.0" || list.DisableGC || len(list.Plugins) != 2 || list.Plugins[1].Network.Type != FaultPluginType {
		t.Fatalf("list %+v", list)
	}
	if strings.Contains(string(raw), "disableGC") {
		t.Fatalf("disableGC written though false:\n%s", raw)
	}
	assertSameJSON(t, list.Plugins[1].Bytes, `{"type":"cni-fault","journal":"/abs/j","stateDir":"/abs/s",
	 "faults":{"STATUS":[{"action":"error","code":50,"msg":"down"}],"GC":[{"action":"crash","count":1}]}}`)

	l.DisableGC = true
	raw, err = l.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if list, err = libcni.ConfListFromBytes(raw); err != nil || !list.DisableGC {
		t.Fatalf("disableGC lost: %v\n%s", err, raw)
	}
}

// The journal keeps [] apart from no list, and the order of the list.
func TestJournalKeepsTheGCList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	lines := `{"verb":"GC","step":-1,"invocation":0,"valid_attachments":[{"containerID":"b","ifname":"eth0"},{"containerID":"a","ifname":"eth0"}],"valid_attachments_key":"list"}
{"verb":"GC","step":-1,"invocation":1,"valid_attachments":[],"valid_attachments_key":"list"}
{"verb":"GC","step":-1,"invocation":2,"valid_attachments_key":"null"}
{"verb":"STATUS","step":-1,"invocation":0}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := ReadJournal(path)
	if err != nil || len(j) != 4 {
		t.Fatalf("%v %v", j, err)
	}
	want := []struct {
		key  AttachmentsKey
		list []Attachment
	}{
		{KeyList, []Attachment{{ContainerID: "b", IfName: "eth0"}, {ContainerID: "a", IfName: "eth0"}}},
		{KeyList, []Attachment{}},
		{KeyNull, nil},
		{"", nil},
	}
	for i, w := range want {
		if j[i].ValidAttachmentsKey != w.key || !reflect.DeepEqual(j[i].ValidAttachments, w.list) {
			t.Errorf("line %d: %s %#v, want %s %#v", i, j[i].ValidAttachmentsKey, j[i].ValidAttachments, w.key, w.list)
		}
	}
}
