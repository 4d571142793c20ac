package cniconf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

func testNetwork(dir string) Network {
	return Network{Name: "cnifault-test", Bridge: "cnf1-abc", Subnet: "10.250.1.0/24", IPAMDataDir: filepath.Join(dir, "ipam")}
}

// The list must be one that libcni, the library every runtime uses, parses
// into the intended plugins.
func TestBridgeListParsesWithLibcni(t *testing.T) {
	n := testNetwork("/data")
	raw, err := BridgeList(n).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatalf("libcni rejects the list: %v\n%s", err, raw)
	}
	if list.Name != "cnifault-test" || list.CNIVersion != DefaultCNIVersion || len(list.Plugins) != 1 {
		t.Fatalf("unexpected list %+v", list)
	}
	if got := list.Plugins[0].Network.Type; got != "bridge" {
		t.Fatalf("plugin type %q", got)
	}
	var bridge struct {
		Bridge    string `json:"bridge"`
		IsGateway *bool  `json:"isGateway"`
		IPAM      struct {
			Type    string `json:"type"`
			DataDir string `json:"dataDir"`
			Ranges  [][]struct {
				Subnet string `json:"subnet"`
			} `json:"ranges"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &bridge); err != nil {
		t.Fatal(err)
	}
	if bridge.Bridge != "cnf1-abc" || bridge.IPAM.Type != "host-local" || bridge.IPAM.DataDir != "/data/ipam" ||
		bridge.IPAM.Ranges[0][0].Subnet != "10.250.1.0/24" {
		t.Fatalf("bridge plugin config %+v", bridge)
	}
	if bridge.IsGateway != nil {
		t.Fatal("isGateway must stay unset: a gateway address adds host routes")
	}
}

func TestChainsKeepOrderAndTypes(t *testing.T) {
	n := testNetwork("/d")
	l := NewList("chain", n.BridgePlugin(), Portmap{Capabilities: map[string]bool{"portMappings": true}},
		Opaque{Type: "not-installed", Fields: map[string]any{"x": 1}}, Loopback{})
	raw, err := l.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	if got := strings.Join(types, ","); got != "bridge,portmap,not-installed,loopback" {
		t.Fatalf("types %s", got)
	}
	if !strings.Contains(string(list.Plugins[2].Bytes), `"x":1`) {
		t.Fatalf("opaque fields lost: %s", list.Plugins[2].Bytes)
	}
}

func TestEmptyListsAreRefused(t *testing.T) {
	if _, err := (NetworkList{Name: "x"}).Bytes(); err == nil {
		t.Fatal("a list without plugins was accepted")
	}
	if _, err := NewList("", Loopback{}).Bytes(); err == nil {
		t.Fatal("a list without a name was accepted")
	}
}

// Writes land inside the dir under their final name and leave no temp file
// that a runtime could try to load.
func TestConfDirWritesInPlace(t *testing.T) {
	dir := t.TempDir()
	d := ConfDir(dir)
	if err := d.WriteList("10-cnifault-test.conflist", BridgeList(testNetwork(dir))); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteRaw("20-cnifault-broken.conflist", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "10-cnifault-test.conflist 20-cnifault-broken.conflist" {
		t.Fatalf("dir holds %v", names)
	}
	snap, err := d.Snapshot()
	if err != nil || string(snap["20-cnifault-broken.conflist"]) != "{not json" {
		t.Fatalf("snapshot %v %v", snap, err)
	}
	if err := d.WriteRaw("../cnifault-escape.conf", nil); err == nil {
		t.Fatal("a path escaping the dir was accepted")
	}
	if err := d.WriteRaw("10-node.conflist", nil); err == nil {
		t.Fatal("a file without the harness mark was accepted")
	}
	node := filepath.Join(dir, "05-node.conflist")
	if err := os.WriteFile(node, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Clear(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "05-node.conflist" {
		t.Fatalf("Clear must remove exactly the harness's files, left %v", entries)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal("Clear must keep the dir itself")
	}
}
