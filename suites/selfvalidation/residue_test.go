package selfvalidation_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/onsi/gomega/types"
	"github.com/vishvananda/netlink"

	"github.com/cnifault/cnifault/fixtures/host"
)

// nodeState is what a harness run could leave on the node.
type nodeState struct {
	Processes []string // "pid cmdline" of live runtime-related processes
	Mounts    []string
	Links     []string
	Files     []string // entries of node dirs a runtime or CNI could touch
}

// nodeDirs are the node-wide places a containerd or CRI-O instance, skopeo
// or a CNI plugin writes to when not told otherwise.
var nodeDirs = []string{
	"/run/cnifault", "/run/containerd", "/run/containerd/s", "/run/netns", "/var/run/nri",
	"/var/lib/cni", "/var/lib/cni/results", "/var/lib/cni/networks", "/opt/containerd", "/tmp",
	"/var/lib/containers", "/var/lib/containers/cache", "/run/containers", "/var/run/crio",
	"/var/lib/crio", "/etc/crio", "/var/log/crio", "/etc/containers", "/var/tmp",
}

// unrelated reports node files other software makes while the harness runs:
// /tmp and /var/tmp belong to everybody, so only names a runtime, skopeo or
// CNI could have made there count.
func unrelated(dir, name string) bool {
	if dir != "/tmp" && dir != "/var/tmp" {
		return false
	}
	for _, p := range []string{"cnifault", "containerd", "cni", "ctr", "runc", "pause", "crio", "conmon", "skopeo", "container", "storage"} {
		if strings.Contains(strings.ToLower(name), p) {
			return false
		}
	}
	return true
}

// harnessProcesses are the programs a run starts, directly or through a
// runtime.
var harnessProcesses = []string{
	"cnifault", "cni-fault", "cnifault-pause", "pause", "containerd", "containerd-shim-runc-v2",
	"runc", "crio", "conmon", "pinns", "bridge", "host-local", "loopback", "portmap",
}

func takeNodeState() *nodeState {
	s := &nodeState{}
	pids, _ := host.Pids()
	for _, pid := range pids {
		args, err := host.Cmdline(pid)
		if err != nil || !host.Alive(pid) {
			continue
		}
		line := strings.Join(args, " ")
		if slices.Contains(harnessProcesses, filepath.Base(args[0])) || strings.Contains(line, "containerd") {
			s.Processes = append(s.Processes, fmt.Sprintf("%d %s", pid, line))
		}
	}
	ms, _ := host.Mounts()
	for _, m := range ms {
		s.Mounts = append(s.Mounts, m.FSType+" "+m.MountPoint)
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		s.Links = append(s.Links, l.Attrs().Name)
	}
	for _, d := range nodeDirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		s.Files = append(s.Files, d+"/")
		for _, e := range entries {
			if !unrelated(d, e.Name()) {
				s.Files = append(s.Files, filepath.Join(d, e.Name()))
			}
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/cnifault-*")
	s.Files = append(s.Files, cgroups...)
	return s
}

// matchNodeState succeeds when nothing was added since before; its failure
// lists every addition.
func matchNodeState(before *nodeState) types.GomegaMatcher { return &nodeStateMatcher{before: before} }

type nodeStateMatcher struct {
	before *nodeState
	added  []string
}

func (m *nodeStateMatcher) Match(actual any) (bool, error) {
	after, ok := actual.(*nodeState)
	if !ok {
		return false, fmt.Errorf("expected *nodeState, got %T", actual)
	}
	m.added = nil
	diff := func(kind string, b, a []string) {
		for _, x := range a {
			if !slices.Contains(b, x) {
				m.added = append(m.added, kind+" "+x)
			}
		}
	}
	diff("process", m.before.Processes, after.Processes)
	diff("mount", m.before.Mounts, after.Mounts)
	diff("link", m.before.Links, after.Links)
	diff("file", m.before.Files, after.Files)
	return len(m.added) == 0, nil
}

func (m *nodeStateMatcher) FailureMessage(any) string {
	return "the harness left residue on the node:\n  " + strings.Join(m.added, "\n  ")
}

func (m *nodeStateMatcher) NegatedFailureMessage(any) string {
	return "expected residue on the node, found none"
}
