package cniconf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// The fault entry must reach cmd/cni-fault, through libcni, exactly in the
// shape the plugin parses.
func TestFaultChainParsesWithLibcni(t *testing.T) {
	fault := Fault{Journal: "/abs/journal.jsonl", StateDir: "/abs/state", PodUID: "uid-1"}.
		On(VerbAdd, Fail(7, "injected").Times(1), Pass()).
		On(VerbDel, Exit(3))
	raw, err := NewList("chain", testNetwork("/d").BridgePlugin(), fault).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatalf("libcni rejects the list: %v\n%s", err, raw)
	}
	if len(list.Plugins) != 2 || list.Plugins[0].Network.Type != "bridge" || list.Plugins[1].Network.Type != FaultPluginType {
		t.Fatalf("plugins %+v", list.Plugins)
	}
	want := `{"type":"cni-fault","journal":"/abs/journal.jsonl","stateDir":"/abs/state","podUID":"uid-1",
	 "faults":{"ADD":[{"action":"error","code":7,"msg":"injected","count":1},{"action":"pass"}],
	           "DEL":[{"action":"exit","status":3}]}}`
	assertSameJSON(t, list.Plugins[1].Bytes, want)

	var back Fault
	if err := json.Unmarshal(list.Plugins[1].Bytes, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, fault) {
		t.Fatalf("round trip:\n%+v\n%+v", back, fault)
	}
}

func assertSameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestStepConstructors(t *testing.T) {
	for _, tc := range []struct {
		step Step
		want string
	}{
		{Pass(), `{"action":"pass"}`},
		{Fail(11, "try again").Times(2), `{"action":"error","code":11,"msg":"try again","count":2}`},
		{Exit(2), `{"action":"exit","status":2}`},
		{Crash("SIGSEGV"), `{"action":"crash","signal":"SIGSEGV"}`},
		{Crash(""), `{"action":"crash"}`},
		{Hang(), `{"action":"hang"}`},
		{Delay(1500 * time.Millisecond), `{"action":"delay","delay":"1.5s"}`},
		{Garbage().Times(1), `{"action":"garbage","count":1}`},
	} {
		raw, err := json.Marshal(tc.step)
		if err != nil {
			t.Fatal(err)
		}
		assertSameJSON(t, raw, tc.want)
	}
}

// A base Fault is shared between specs; On must not leak one spec's faults
// into another's.
func TestOnCopies(t *testing.T) {
	base := Fault{StateDir: "/s"}.On(VerbAdd, Pass())
	steps := []Step{Hang()}
	derived := base.On(VerbDel, steps...).On(VerbAdd)
	steps[0] = Garbage()
	if len(base.Faults) != 1 || base.Faults[VerbAdd][0] != Pass() {
		t.Fatalf("base changed: %+v", base.Faults)
	}
	if _, ok := derived.Faults[VerbAdd]; ok || derived.Faults[VerbDel][0] != Hang() {
		t.Fatalf("derived %+v", derived.Faults)
	}
	raw, err := json.Marshal(Fault{Journal: "/j", StateDir: "/s"})
	if err != nil {
		t.Fatal(err)
	}
	assertSameJSON(t, raw, `{"journal":"/j","stateDir":"/s"}`)
}

func TestReadJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	if entries, err := ReadJournal(path); err != nil || entries != nil {
		t.Fatalf("missing journal: %v %v", entries, err)
	}
	line := `{"time":"2026-01-02T03:04:05.123456789Z","verb":"ADD","container_id":"c","netns":"/n","ifname":"eth0",` +
		`"pod_uid":"u","action":"crash","step":1,"invocation":3,"targeted":true,"pid":42}` + "\n"
	if err := os.WriteFile(path, []byte(line+line), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := ReadJournal(path)
	if err != nil || len(entries) != 2 {
		t.Fatalf("%v %v", entries, err)
	}
	e := entries[0]
	if e.Verb != VerbAdd || e.Action != ActionCrash || e.Step != 1 || e.Invocation != 3 || !e.Targeted || e.PID != 42 ||
		e.Time.Nanosecond() != 123456789 || e.PodUID != "u" || e.ContainerID != "c" || e.Netns != "/n" || e.IfName != "eth0" {
		t.Fatalf("entry %+v", e)
	}
	if err := os.WriteFile(path, []byte(line+"{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournal(path); err == nil {
		t.Fatal("a torn line was accepted")
	}
}

func TestFiringIsTheFirstStepThatBreaksTheCall(t *testing.T) {
	f := Fault{}.On(VerbAdd, Pass().Times(1), Delay(time.Second).Times(1), Fail(7, "x"), Pass()).On(VerbDel, Pass())
	i, s, ok := f.Firing(VerbAdd)
	if !ok || i != 2 || s.Action != ActionError {
		t.Fatalf("ADD: got %d %+v %v, want step 2 error", i, s, ok)
	}
	if _, _, ok := f.Firing(VerbDel); ok {
		t.Fatal("DEL only passes, yet a step fires")
	}
	if _, _, ok := f.Firing(VerbCheck); ok {
		t.Fatal("CHECK has no steps, yet a step fires")
	}
}

func TestJournalEntryFired(t *testing.T) {
	for _, tc := range []struct {
		e    JournalEntry
		want bool
	}{
		{JournalEntry{Targeted: true, Step: 0, Action: ActionError}, true},
		{JournalEntry{Targeted: true, Step: 1, Action: ActionHang}, true},
		{JournalEntry{Targeted: true, Step: 0, Action: ActionPass}, false},
		{JournalEntry{Targeted: true, Step: 0, Action: ActionDelay}, false},
		{JournalEntry{Targeted: true, Step: -1, Action: ActionPass}, false},
		{JournalEntry{Targeted: false, Step: -1, Action: ActionPass}, false},
	} {
		if got := tc.e.Fired(); got != tc.want {
			t.Errorf("%+v: Fired() = %v, want %v", tc.e, got, tc.want)
		}
	}
	if s := (JournalEntry{Verb: VerbAdd, Action: ActionError, Step: 0}).String(); s != "ADD error (step 0)" {
		t.Errorf("String() = %q", s)
	}
}
