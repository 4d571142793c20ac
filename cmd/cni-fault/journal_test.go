package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/internal/testenv"
)

// journalKeys is the line schema the harness relies on.
var journalKeys = []string{"action", "container_id", "ifname", "invocation", "netns", "pid", "pod_uid", "step", "targeted", "time", "verb"}

// Every invocation is journaled before it acts, including the ones that
// never get to print anything.
func TestJournalRecordsEveryInvocation(t *testing.T) {
	h := newHarness(t)
	h.fault = h.fault.On(cniconf.VerbAdd,
		cniconf.Fail(7, "x").Times(1), cniconf.Crash("SIGKILL").Times(1), cniconf.Hang().Times(1),
		cniconf.Garbage().Times(1), cniconf.Exit(3).Times(1))
	start := time.Now()
	var pids []int
	for range 2 {
		pids = append(pids, h.run(cniconf.VerbAdd, "pod-a").pid)
	}
	c, _ := h.command(cniconf.VerbAdd, "pod-a")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, c.Process.Pid)
	// The hanging invocation has journaled before anyone kills it.
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(h.journal()); n < 3 {
			return fmt.Errorf("the journal holds %d invocations, want the hanging third", n)
		}
		return nil
	})
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	for range 3 {
		pids = append(pids, h.run(cniconf.VerbAdd, "pod-a").pid)
	}
	pids = append(pids, h.run(cniconf.VerbDel, "pod-a").pid)

	f, err := os.Open(h.fault.Journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines int
	for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("line %d is not JSON: %q", lines, sc.Text())
		}
		var keys []string
		for k := range raw {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, journalKeys) {
			t.Fatalf("line %d has keys %v", lines, keys)
		}
	}

	j := h.journal()
	if len(j) != lines || len(j) != len(pids) {
		t.Fatalf("%d lines, %d parsed, %d invocations", lines, len(j), len(pids))
	}
	actions := []cniconf.Action{"error", "crash", "hang", "garbage", "exit", "pass"}
	for i, e := range j {
		if e.PID != pids[i] || e.Time.Before(start) || e.Time.After(time.Now()) || !e.Targeted ||
			e.ContainerID != "ctr-pod-a" || e.Netns != "/proc/1/ns/net" || e.IfName != "eth0" || e.PodUID != "pod-a" {
			t.Errorf("line %d: %+v (pid %d)", i, e, pids[i])
		}
		if i < len(actions) {
			wantStep := i
			if i >= 5 {
				wantStep = -1
			}
			if e.Verb != cniconf.VerbAdd || e.Action != actions[i] || e.Step != wantStep || e.Invocation != i {
				t.Errorf("line %d: %+v", i, e)
			}
		}
	}
	if last := j[len(j)-1]; last.Verb != cniconf.VerbDel || last.Action != cniconf.ActionPass || last.Invocation != 0 {
		t.Errorf("DEL line %+v", last)
	}
	if ws := c.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
		t.Errorf("hang exited by itself: %v", ws)
	}
}

// Without a journal path nothing is written but the counters.
func TestNoJournal(t *testing.T) {
	h := newHarness(t)
	h.fault.Journal = ""
	h.fault = h.fault.On(cniconf.VerbAdd, cniconf.Fail(7, "x").Times(1))
	h.run(cniconf.VerbAdd, "pod-a").cniError(t)
	h.run(cniconf.VerbAdd, "pod-a").passed(t)
	if entries, _ := os.ReadDir(h.dir); len(entries) != 1 || entries[0].Name() != "state" {
		t.Fatalf("dir holds %v", entries)
	}
}
