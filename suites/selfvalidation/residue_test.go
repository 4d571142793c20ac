package selfvalidation_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/onsi/gomega/types"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/fixtures/host"
)

// The node-residue check counts only what this self-validation's harness
// runs made: other software on the node (a build whose argv says
// "containerd", another harness's instance, an unrelated mount or link)
// comes and goes as it likes.
//
//   - processes: the live descendants of this process, which is a child
//     subreaper (host.AdoptOrphans), so shims, conmons, pause processes and
//     plugins that daemonized away from a harness come back to it;
//   - mounts: under the repo's _output or an own instance's state dir, and
//     nsfs mounts anywhere of a netns pinned there or held by a descendant;
//   - links: an own run's bridge (cnf<N>-<run id>), a port of it, a veth
//     whose peer is in an own netns;
//   - files: entries of node dirs named for an own run, libcni cache entries
//     of an own pod, and node dirs that did not exist before and are empty.

// stateRoot is where every harness run keeps its instance's state dir.
const stateRoot = "/run/cnifault"

// nodeState is what a harness run could leave on the node.
type nodeState struct {
	Processes []string // "pid argv" of live descendants
	Mounts    []string // "fstype mount point"
	Links     []string
	Files     []string
	// The node dirs that exist, and those of them that are empty: a node
	// dir that appears during the run and is left empty is one a harness
	// run made and did not take away again. One that holds entries of
	// others is theirs too (or shared), and an own entry in it is reported
	// for itself.
	Dirs, EmptyDirs []string
}

// owned is what identifies the harness runs of this self-validation: their
// run ids (an instance is <run id>-p<N>) and the names of instances specs
// start themselves.
type owned struct {
	mu     sync.Mutex
	tokens map[string]bool
}

var own = &owned{tokens: map[string]bool{
	// external_test.go's stand-in node runtime.
	fmt.Sprintf("node-%d", os.Getpid()): true,
	// slow_node_test.go's CPU limit (slowLimitName).
	fmt.Sprintf("slow-%d", os.Getpid()): true,
}}

// instanceName matches a harness instance, <run id>-p<N>, at the end of a
// state or work dir's name.
var instanceName = regexp.MustCompile(`(?:^|-)([0-9a-f]{6})-p[0-9]+$`)

// record remembers the run of an instance dir (state or work dir).
func (o *owned) record(dir string) {
	if m := instanceName.FindStringSubmatch(filepath.Base(dir)); m != nil {
		o.mu.Lock()
		o.tokens[m[1]] = true
		o.mu.Unlock()
	}
}

// recordEndpoint remembers the run of a managed runtime's endpoint
// (unix:///run/cnifault/<instance>/c.sock), as a report gives it.
func (o *owned) recordEndpoint(endpoint string) {
	if u, err := url.Parse(endpoint); err == nil && host.Under(u.Path, stateRoot) {
		o.record(filepath.Dir(u.Path))
	}
}

// recordWorkDirs remembers the runs whose instance work dirs are in the
// repo's work roots now.
func (o *owned) recordWorkDirs() {
	roots, _ := filepath.Glob(filepath.Join(repoRoot, "_output", "work*"))
	for _, r := range roots {
		entries, _ := os.ReadDir(r)
		for _, e := range entries {
			o.record(e.Name())
		}
	}
}

// owns reports whether name carries an own run id or instance name as a
// part of its own ("cnifault-<id>-p1", "cnf1-<id>"): run ids are random,
// and node-<pid> must not match another process's node-<pid>1.
func (o *owned) owns(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for t := range o.tokens {
		for rest, at := name, 0; ; {
			i := strings.Index(rest, t)
			if i < 0 {
				break
			}
			start, end := at+i, at+i+len(t)
			if (start == 0 || name[start-1] == '-') && (end == len(name) || name[end] == '-') {
				return true
			}
			rest, at = rest[i+1:], at+i+1
		}
	}
	return false
}

// ownBridge matches an own run's bridge, cnf<N>-<run id>.
func (o *owned) ownBridge(name string) bool {
	run, ok := strings.CutPrefix(name, "cnf")
	if _, id, found := strings.Cut(run, "-"); ok && found {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.tokens[id]
	}
	return false
}

// harnessRoots are the dirs under which everything is this
// self-validation's: its repo's _output (work dirs, reports).
func harnessRoots() []string { return []string{filepath.Join(repoRoot, "_output")} }

// ownPath reports whether p lies under a harness root or an own instance's
// state dir.
func ownPath(p string) bool {
	for _, r := range harnessRoots() {
		if host.Under(p, r) {
			return true
		}
	}
	if rel, err := filepath.Rel(stateRoot, p); err == nil && host.Under(p, stateRoot) && rel != "." {
		return own.owns(strings.Split(rel, "/")[0])
	}
	return false
}

// nodeDirs are the node-wide places a containerd or CRI-O instance, skopeo
// or a CNI plugin writes to when not told otherwise.
var nodeDirs = []string{
	stateRoot, "/run/containerd", "/run/containerd/s", "/run/netns", "/var/run/nri",
	"/var/lib/cni", "/var/lib/cni/results", "/var/lib/cni/networks", "/opt/containerd", "/tmp",
	"/var/lib/containers", "/var/lib/containers/cache", "/run/containers", "/var/run/crio",
	"/var/lib/crio", "/etc/crio", "/var/log/crio", "/etc/containers", "/var/tmp",
}

func takeNodeState() *nodeState {
	own.recordWorkDirs()
	s := &nodeState{}
	self := os.Getpid()
	table, _ := host.ReadProcTable()
	descendants := host.Descendants(table, self)
	// The netns of the harness's processes and pins, by inode ("net:[N]"),
	// for nsfs mounts elsewhere and veth peers.
	ownNS := map[string]bool{}
	selfNS, _ := os.Readlink("/proc/self/ns/net")
	for _, p := range table {
		if _, ok := descendants[p.PID]; !ok || p.Zombie() {
			continue
		}
		s.Processes = append(s.Processes, fmt.Sprintf("%d %s", p.PID, strings.Join(p.Argv, " ")))
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p.PID)); err == nil && ns != selfNS {
			ownNS[ns] = true
		}
	}
	ms, _ := host.Mounts()
	var nsfs []host.Mount
	for _, m := range ms {
		switch {
		case ownPath(m.MountPoint):
			s.Mounts = append(s.Mounts, m.FSType+" "+m.MountPoint)
			if m.FSType == "nsfs" {
				ownNS[m.Root] = true
			}
		case m.FSType == "nsfs":
			nsfs = append(nsfs, m)
		}
	}
	for _, m := range nsfs {
		if ownNS[m.Root] {
			s.Mounts = append(s.Mounts, m.FSType+" "+m.MountPoint)
		}
	}
	s.Links = ownLinks(ownNS, table, descendants)
	for _, d := range nodeDirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		s.Dirs = append(s.Dirs, d)
		if len(entries) == 0 {
			s.EmptyDirs = append(s.EmptyDirs, d)
		}
		for _, e := range entries {
			if own.owns(e.Name()) || d == "/var/lib/cni/results" && ownCacheEntry(filepath.Join(d, e.Name())) {
				s.Files = append(s.Files, filepath.Join(d, e.Name()))
			}
		}
	}
	for _, c := range host.CgroupGlob("/cnifault-*") {
		if own.owns(filepath.Base(c)) {
			s.Files = append(s.Files, c)
		}
	}
	return s
}

// ownLinks lists the links a harness run made: an own run's bridge, the
// ports of such a bridge, and veths whose peer is in an own netns.
func ownLinks(ownNS map[string]bool, table []host.ProcInfo, descendants map[int]int) []string {
	links, _ := netlink.LinkList()
	// The kernel names a veth's peer netns by an id local to this netns.
	ownIDs := map[int]bool{}
	for ns := range ownNS {
		if id, ok := netnsID(ns, table, descendants); ok {
			ownIDs[id] = true
		}
	}
	bridges := map[int]bool{}
	for _, l := range links {
		if own.ownBridge(l.Attrs().Name) {
			bridges[l.Attrs().Index] = true
		}
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		_, veth := l.(*netlink.Veth)
		if own.ownBridge(a.Name) || own.owns(a.Name) || bridges[a.MasterIndex] || veth && a.NetNsID >= 0 && ownIDs[a.NetNsID] {
			out = append(out, a.Name)
		}
	}
	return out
}

// netnsID returns the netns id this netns gave ns ("net:[N]"), opened
// through a descendant in it or a pin of it.
func netnsID(ns string, table []host.ProcInfo, descendants map[int]int) (int, bool) {
	var paths []string
	for _, p := range table {
		path := fmt.Sprintf("/proc/%d/ns/net", p.PID)
		if _, ok := descendants[p.PID]; ok {
			if l, err := os.Readlink(path); err == nil && l == ns {
				paths = append(paths, path)
			}
		}
	}
	ms, _ := host.Mounts()
	for _, m := range ms {
		if m.FSType == "nsfs" && m.Root == ns {
			paths = append(paths, m.MountPoint)
		}
	}
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		id, err := netlink.GetNetNsIdByFd(fd)
		unix.Close(fd)
		if err == nil && id >= 0 {
			return id, true
		}
	}
	return 0, false
}

// ownCacheEntry reports whether a libcni cache entry is of a pod of an own
// instance: of a cnifault network or containerd's cni-loopback, with its
// netns (or, before libcni 1.2, its result's sandbox) under an own dir. One
// whose netns is unknown counts if its network is cnifault's.
func ownCacheEntry(path string) bool {
	cnifault := strings.HasPrefix(filepath.Base(path), "cnifault-")
	if !cnifault && !strings.HasPrefix(filepath.Base(path), "cni-loopback-") {
		return false
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	// A half-written entry names nothing yet: judged by its name alone.
	_, paths, _ := daemon.CachedNetNS(raw)
	for _, p := range paths {
		if ownPath(p) {
			return true
		}
	}
	return len(paths) == 0 && cnifault
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
	for _, d := range after.EmptyDirs {
		if !slices.Contains(m.before.Dirs, d) {
			m.added = append(m.added, "dir "+d)
		}
	}
	return len(m.added) == 0, nil
}

func (m *nodeStateMatcher) FailureMessage(any) string {
	return "the harness left residue on the node:\n  " + strings.Join(m.added, "\n  ")
}

func (m *nodeStateMatcher) NegatedFailureMessage(any) string {
	return "expected residue on the node, found none"
}
