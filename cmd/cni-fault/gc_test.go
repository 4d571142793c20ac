package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/internal/testenv"
)

// A GC is journaled with the list exactly as it arrived: order and
// duplicates kept, [] apart from null and from no key at all.
func TestGCJournalsTheListItReceived(t *testing.T) {
	list := []cniconf.Attachment{att("ctr-z", "eth0"), att("ctr-a", "eth1"), att("ctr-a", "eth0"), att("ctr-z", "eth0")}
	listJSON, _ := json.Marshal(list)
	for _, tc := range []struct {
		name string
		raw  string // "" for no key
		key  cniconf.AttachmentsKey
		want []cniconf.Attachment
		line string // what the journal line must hold, "" for no valid_attachments key
	}{
		{"list", string(listJSON), cniconf.KeyList, list, `"valid_attachments":` + string(listJSON)},
		{"empty", `[]`, cniconf.KeyList, []cniconf.Attachment{}, `"valid_attachments":[]`},
		{"null", `null`, cniconf.KeyNull, nil, ""},
		{"absent", "", cniconf.KeyAbsent, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.cniVersion = cniconf.CNIVersion110
			if tc.raw != "" {
				// libcni sends the list under both names.
				h.extra = map[string]json.RawMessage{
					"cni.dev/valid-attachments": json.RawMessage(tc.raw),
					"cni.dev/attachments":       json.RawMessage(tc.raw),
				}
			}
			h.run(cniconf.VerbGC, "").passed(t)
			j := h.journal()
			if len(j) != 1 {
				t.Fatalf("journal %+v", j)
			}
			e := j[0]
			if e.Verb != cniconf.VerbGC || e.ValidAttachmentsKey != tc.key || !reflect.DeepEqual(e.ValidAttachments, tc.want) {
				t.Fatalf("journaled %s %#v, want %s %#v", e.ValidAttachmentsKey, e.ValidAttachments, tc.key, tc.want)
			}
			raw := journalLines(t, h)[0]
			if tc.line != "" && !strings.Contains(raw, tc.line) || tc.line == "" && strings.Contains(raw, `"valid_attachments":`) {
				t.Fatalf("line %s, want it to hold %q", raw, tc.line)
			}
		})
	}
}

// STATUS and GC are journaled as node-level invocations (no container, netns,
// ifname or pod, targeted whatever the pod target) before they act, so a
// hang or a crash is on record too.
func TestNodeVerbsJournalBeforeTheyAct(t *testing.T) {
	for _, verb := range []cniconf.Verb{cniconf.VerbStatus, cniconf.VerbGC} {
		t.Run(string(verb), func(t *testing.T) {
			h := newHarness(t)
			h.cniVersion = cniconf.CNIVersion110
			h.fault.PodUID = "pod-a"
			h.fault = h.fault.On(verb, cniconf.Crash("SIGSEGV").Times(1), cniconf.Hang().Times(1))
			if verb == cniconf.VerbGC {
				h.extra = map[string]json.RawMessage{"cni.dev/valid-attachments": json.RawMessage(`[{"containerID":"ctr-b","ifname":"eth0"}]`)}
			}
			if o := h.run(verb, ""); !o.status.Signaled() || o.status.Signal() != syscall.SIGSEGV {
				t.Fatalf("crash step: %v", o.status)
			}
			c, _ := h.command(verb, "")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, func() error {
				if n := len(h.journal()); n < 2 {
					return fmt.Errorf("the journal holds %d invocations, want the hanging second", n)
				}
				return nil
			})
			if err := c.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = c.Wait()
			h.run(verb, "").passed(t)

			j := h.journal()
			if len(j) != 3 {
				t.Fatalf("journal %+v", j)
			}
			for i, want := range []struct {
				action cniconf.Action
				step   int
			}{{cniconf.ActionCrash, 0}, {cniconf.ActionHang, 1}, {cniconf.ActionPass, -1}} {
				e := j[i]
				if e.Verb != verb || e.Action != want.action || e.Step != want.step || e.Invocation != i || !e.Targeted ||
					e.PodUID != "" || e.ContainerID != "" || e.Netns != "" || e.IfName != "" {
					t.Errorf("line %d: %+v", i, e)
				}
				if verb == cniconf.VerbGC && (e.ValidAttachmentsKey != cniconf.KeyList ||
					!slices.Equal(e.ValidAttachments, []cniconf.Attachment{att("ctr-b", "eth0")})) {
					t.Errorf("line %d: GC list %s %v", i, e.ValidAttachmentsKey, e.ValidAttachments)
				}
				if verb == cniconf.VerbStatus && (e.ValidAttachmentsKey != "" || e.ValidAttachments != nil) {
					t.Errorf("line %d: STATUS with a GC list: %+v", i, e)
				}
			}
			assertCounter(t, h, "_node-"+string(verb), 3)
			// Only GC lines carry the list's keys.
			want := journalKeys
			if verb == cniconf.VerbGC {
				want = append(slices.Clone(journalKeys), "valid_attachments", "valid_attachments_key")
				slices.Sort(want)
			}
			for i, line := range journalLines(t, h) {
				if keys := lineKeys(t, line); !slices.Equal(keys, want) {
					t.Errorf("line %d has keys %v, want %v", i, keys, want)
				}
			}
		})
	}
}

// A list of the wrong shape is refused before anything is counted or
// journaled, on every verb: types.PluginConf decodes the key, as host-local
// does.
func TestMalformedListIsRefused(t *testing.T) {
	for _, verb := range []cniconf.Verb{cniconf.VerbGC, cniconf.VerbAdd} {
		h := newHarness(t)
		h.cniVersion = cniconf.CNIVersion110
		h.extra = map[string]json.RawMessage{"cni.dev/valid-attachments": json.RawMessage(`{"containerID":"c"}`)}
		if e := h.run(verb, "pod-a").cniError(t); e.Code != types.ErrDecodingFailure {
			t.Fatalf("%s: %+v", verb, e)
		}
		if j := h.journal(); len(j) != 0 {
			t.Fatalf("%s journaled %+v", verb, j)
		}
	}
}

func att(containerID, ifname string) cniconf.Attachment {
	return cniconf.Attachment{ContainerID: containerID, IfName: ifname}
}

func journalLines(t *testing.T, h *harness) []string {
	t.Helper()
	f, err := os.Open(h.fault.Journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	return lines
}

func lineKeys(t *testing.T, line string) []string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		t.Fatalf("not JSON: %q", line)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
