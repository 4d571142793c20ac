package selfvalidation_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/fixtures/host"
)

// orphan starts argv through a shell that exits at once, so that argv's
// process is orphaned, and returns its pid; it is killed (with its group)
// when the spec ends. Adopted by this process unless elsewhere is set:
// then it is reparented to an ancestor, as a process nobody here started.
func orphan(elsewhere bool, argv ...string) int {
	GinkgoHelper()
	if elsewhere {
		Expect(unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)).To(Succeed())
		defer func() { Expect(unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)).To(Succeed()) }()
	}
	sh := exec.Command("sh", append([]string{"-c", `"$@" & echo $!`, "sh"}, argv...)...)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(sh.Start()).To(Succeed())
	line, _ := bufio.NewReader(out).ReadString('\n')
	var pid int
	_, err = fmt.Sscan(line, &pid)
	Expect(err).NotTo(HaveOccurred(), "sh said %q", line)
	group := sh.Process.Pid
	DeferCleanup(func() { _ = syscall.Kill(-group, syscall.SIGKILL) })
	Expect(sh.Wait()).To(Succeed())
	Eventually(func(g Gomega) {
		ppid, err := host.PPid(pid)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ppid != os.Getpid()).To(Equal(elsewhere), "the parent of %d", pid)
		g.Expect(ppid).NotTo(Equal(group))
		// Until sh's forked child has exec'd argv, it is still an sh.
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")).To(Equal(argv), "the argv of %d", pid)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	return pid
}

// addLink adds a link and deletes it when the spec ends.
func addLink(l netlink.Link) {
	GinkgoHelper()
	Expect(netlink.LinkAdd(l)).To(Succeed(), "adding %s", l.Attrs().Name)
	DeferCleanup(func() {
		if got, err := netlink.LinkByName(l.Attrs().Name); err == nil {
			Expect(netlink.LinkDel(got)).To(Succeed())
		}
	})
}

// linkName is a link name of this process's own: prefix, pid, end.
func linkName(prefix string, end int) string {
	return fmt.Sprintf("%s%d-%d", prefix, os.Getpid()%100000, end)
}

// mountTmpfs mounts a tmpfs on a new dir and takes both away when the spec
// ends.
func mountTmpfs(dir string) {
	GinkgoHelper()
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(unix.Mount("cnifault-residue", dir, "tmpfs", 0, "size=64k")).To(Succeed())
	DeferCleanup(func() {
		Expect(unix.Unmount(dir, unix.MNT_DETACH)).To(Succeed())
		Expect(os.Remove(dir)).To(Succeed())
	})
}

// spareNodeDir is a node dir of nodeDirs that no managed instance uses.
const spareNodeDir = "/opt/containerd"

// newNodeDir makes spareNodeDir if the node has none, and takes it away
// when the spec ends; it reports whether it made it.
func newNodeDir() bool {
	GinkgoHelper()
	if _, err := os.Lstat(spareNodeDir); err == nil {
		return false
	}
	Expect(os.Mkdir(spareNodeDir, 0o755)).To(Succeed())
	DeferCleanup(os.Remove, spareNodeDir)
	return true
}

// cniResults is libcni's node-wide cache dir.
const cniResults = "/var/lib/cni/results"

// cniResultsDir makes libcni's cache dir where no runtime has yet, before
// a spec takes the node's state, so that the spec's entries are all it
// adds; it removes what it made once the spec's entries are gone.
func cniResultsDir() {
	GinkgoHelper()
	for _, d := range []string{filepath.Dir(cniResults), cniResults} {
		if _, err := os.Lstat(d); err == nil {
			continue
		}
		Expect(os.Mkdir(d, 0o700)).To(Succeed())
		DeferCleanup(func() { _ = syscall.Rmdir(d) }) // kept if a runtime wrote there since
	}
}

var _ = Describe("The residue check", Serial, func() {
	var before *nodeState
	var run string // a run id of this self-validation's, as a harness run has

	BeforeEach(func() {
		run = fmt.Sprintf("%06x", os.Getpid()%0xffffff)
		own.record(run + "-p9")
		cniResultsDir()
		before = takeNodeState()
		Expect(takeNodeState()).To(matchNodeState(before), "a node nothing happened on")
	})

	When("other software on the node starts a process, a mount and links", func() {
		It("counts none of them", func() {
			By("starting what a harness run did not make")
			// The argv the old check matched on, under another parent.
			orphan(true, "sh", "-c", "sleep 300; :", "containerd", "cnifault")
			mountTmpfs(filepath.Join(GinkgoT().TempDir(), "unrelated"))
			// Another harness's bridge, and a veth pair on no harness bridge.
			addLink(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("cnf9-%06x", (os.Getpid()+1)%0xffffff)}})
			addLink(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: linkName("rsu", 0)}, PeerName: linkName("rsu", 1)})
			// containerd's loopback entry of a pod of another instance.
			other := filepath.Join(cniResults, fmt.Sprintf("cni-loopback-%06x-other-lo", (os.Getpid()+1)%0xffffff))
			Expect(os.WriteFile(other, []byte(`{"kind":"cniCacheV1","containerId":"other","ifName":"lo","networkName":"cni-loopback","result":{"cniVersion":"0.3.1","interfaces":[{"name":"lo","sandbox":"/var/run/netns/cni-other"}]}}`), 0o600)).To(Succeed())
			DeferCleanup(os.Remove, other)
			// A node dir someone else makes and uses.
			if newNodeDir() {
				Expect(os.WriteFile(filepath.Join(spareNodeDir, "someone-elses"), nil, 0o644)).To(Succeed())
				DeferCleanup(os.Remove, filepath.Join(spareNodeDir, "someone-elses"))
			}

			By("inspecting the node")
			Expect(takeNodeState()).To(matchNodeState(before))
		})
	})

	When("a harness run leaves a process, a mount, links and a state dir", func() {
		It("counts each of them", func() {
			By("leaving what a harness run makes")
			// No harness word in its argv: it is counted as a descendant.
			pid := orphan(false, "sleep", "300")
			mounted := filepath.Join(repoRoot, "_output", "work-residue", "shm")
			DeferCleanup(os.Remove, filepath.Dir(mounted)) // runs after the unmount
			mountTmpfs(mounted)
			bridge := "cnf9-" + run
			addLink(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}})
			addLink(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: linkName("rsp", 0)}, PeerName: linkName("rsp", 1)})
			port, err := netlink.LinkByName(linkName("rsp", 0))
			Expect(err).NotTo(HaveOccurred())
			br, err := netlink.LinkByName(bridge)
			Expect(err).NotTo(HaveOccurred())
			Expect(netlink.LinkSetMaster(port, br)).To(Succeed())
			made := newNodeDir()
			state := filepath.Join(stateRoot, run+"-p9")
			Expect(os.MkdirAll(state, 0o755)).To(Succeed())
			DeferCleanup(func() {
				Expect(os.Remove(state)).To(Succeed())
				_ = syscall.Rmdir(stateRoot) // only if empty: other runs share it
			})

			// containerd 1.6's loopback entry of a pod it forgot, as
			// libcni before 1.2 writes it: no netns, the result names it
			// (and neither its name nor its id carries the run id).
			id := fmt.Sprintf("residue%d", os.Getpid())
			cache := filepath.Join(cniResults, "cni-loopback-"+id+"-lo")
			Expect(os.WriteFile(cache, fmt.Appendf(nil, `{"kind":"cniCacheV1","containerId":%q,"ifName":"lo","networkName":"cni-loopback","result":{"cniVersion":"0.3.1","interfaces":[{"name":"lo","sandbox":%q}]}}`,
				id, filepath.Join(state, "netns", "cni-residue")), 0o600)).To(Succeed())
			DeferCleanup(os.Remove, cache)

			// In the layout's first hierarchy: /sys/fs/cgroup/pids on
			// v1, /sys/fs/cgroup itself on v2.
			Expect(host.Cgroups().Hierarchies).NotTo(BeEmpty(), "no cgroup hierarchy")
			cgroup := filepath.Join(host.Cgroups().Hierarchies[0].Path, "cnifault-"+run+"-p9")
			Expect(os.Mkdir(cgroup, 0o755)).To(Succeed())
			DeferCleanup(syscall.Rmdir, cgroup)

			By("inspecting the node")
			m := matchNodeState(before)
			Expect(m.Match(takeNodeState())).To(BeFalse())
			Expect(m.FailureMessage(nil)).To(SatisfyAll(
				ContainSubstring(fmt.Sprintf("process %d sleep 300", pid)),
				ContainSubstring("mount tmpfs "+mounted),
				ContainSubstring("link "+bridge),
				ContainSubstring("link "+linkName("rsp", 0)),
				ContainSubstring("file "+state),
				ContainSubstring("file "+cgroup),
				ContainSubstring("file "+cache),
			))
			if made {
				Expect(m.FailureMessage(nil)).To(ContainSubstring("dir " + spareNodeDir))
			}
		})
	})
})

var _ = Describe("An own name", func() {
	DescribeTable("is one that carries an own run id or instance as a whole part",
		func(name string, want bool) {
			own.record("a1b2c3-p1")
			Expect(own.owns(name)).To(Equal(want))
		},
		Entry("a state dir", "a1b2c3-p1", true),
		Entry("a cgroup parent", "cnifault-a1b2c3-p2", true),
		Entry("the stand-in's state dir", fmt.Sprintf("node-%d", os.Getpid()), true),
		Entry("another process's stand-in", fmt.Sprintf("node-%d1", os.Getpid()), false),
		Entry("a longer hex run", "a1b2c3d4-p1", false),
		Entry("a build dir", "go-build1a1b2c3", false),
	)
})
