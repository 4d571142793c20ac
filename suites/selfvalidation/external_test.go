package selfvalidation_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/fixtures/external"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/image"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// Timeouts of the external-mode specs.
const (
	// nodeRuntimeTimeout bounds bringing up and tearing down the stand-in
	// for a node's own runtime.
	nodeRuntimeTimeout = 2 * time.Minute
	// foreignPodInterval is how often a foreign pod is started while a run
	// goes on, as on a live node.
	foreignPodInterval = time.Second
	// foreignCallTimeout bounds one CRI call for a foreign pod.
	foreignCallTimeout = 30 * time.Second
)

// restoreTimeout bounds `cnifault restore`, which undoes what an external
// run's teardown would: that teardown's bound, with a margin.
var restoreTimeout = external.Bounds.Teardown + time.Minute

// nodeFile is a file of a node dir with everything that makes it the node's.
type nodeFile struct {
	Mode     os.FileMode
	UID, GID uint32
	Inode    uint64
	ATime    time.Time
	MTime    time.Time
	Target   string // a symlink's
	Content  string // a regular file's
	XAttrs   map[string]string
}

// nodeFiles reads dir's files. A symlink is read and a file's content too
// before its metadata: the read itself may update the access time.
// withATime false leaves access times out (a bin dir's plugins are read by
// the runtime whenever it runs them).
func nodeFiles(dir string, withATime bool) map[string]nodeFile {
	GinkgoHelper()
	entries, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]nodeFile{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var f nodeFile
		if e.Type()&os.ModeSymlink != 0 {
			f.Target, err = os.Readlink(p)
			Expect(err).NotTo(HaveOccurred())
		} else if e.Type().IsRegular() {
			raw, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			f.Content = string(raw)
		}
		var st unix.Stat_t
		Expect(unix.Lstat(p, &st)).To(Succeed())
		info, err := os.Lstat(p)
		Expect(err).NotTo(HaveOccurred())
		f.Mode, f.UID, f.GID, f.Inode = info.Mode(), st.Uid, st.Gid, st.Ino
		f.MTime = time.Unix(st.Mtim.Unix())
		if withATime {
			f.ATime = time.Unix(st.Atim.Unix())
		}
		f.XAttrs = xattrsOf(p)
		out[e.Name()] = f
	}
	return out
}

func xattrsOf(path string) map[string]string {
	GinkgoHelper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(path, buf)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		if len(name) == 0 {
			continue
		}
		val := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(path, string(name), val)
		Expect(err).NotTo(HaveOccurred())
		out[string(name)] = string(val[:m])
	}
	return out
}

// setTimes gives path (a symlink itself, not its target) an access and a
// modification time.
func setTimes(path string, atime, mtime time.Time) {
	GinkgoHelper()
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	Expect(unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW)).To(Succeed())
}

// externalWorkRoot is the work root of every external-mode run here.
func externalWorkRoot() string { return filepath.Join(repoRoot, "_output", "work-external") }

// runExternal runs the suite against an endpoint and returns its exit code
// and output.
func runExternal(ctx context.Context, reportDir string, args ...string) (int, string) {
	GinkgoHelper()
	cmd := suiteCommand(ctx, "", reportDir, externalWorkRoot(), args...)
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("%s\n", out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	Expect(err).NotTo(HaveOccurred())
	return 0, string(out)
}

// foreignPods are pods of the node's runtime that are not the harness's:
// the node's workload.
type foreignPods struct {
	mu sync.Mutex
	// live are the pods that must survive, by id.
	live   []string
	failed []string // RunPodSandbox errors while a run broke the network
	seq    int
}

func (f *foreignPods) run(ctx context.Context, node *containerd.Instance, name, namespace string, labels map[string]string) (string, error) {
	f.mu.Lock()
	f.seq++
	uid := fmt.Sprintf("foreign-%d-%d", os.Getpid(), f.seq)
	f.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, foreignCallTimeout)
	defer cancel()
	id, err := node.CRI().RunPodSandbox(cctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Labels:   labels,
		Linux:    &runtimeapi.LinuxPodSandboxConfig{CgroupParent: node.CgroupParent()},
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.failed = append(f.failed, err.Error())
		return "", err
	}
	f.live = append(f.live, id)
	return id, nil
}

// churn starts a foreign pod every foreignPodInterval until ctx ends, as
// kubelet would on a node that was not drained. (It removes none: a pod
// removed while the run holds the conf dir is torn down with the run's
// network, since containerd DELs the networks it has loaded now, and its
// own address would stay reserved — the reason to drain a node first.) The
// returned func stops it and waits.
func (f *foreignPods) churn(ctx context.Context, node *containerd.Instance) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		tick := time.NewTicker(foreignPodInterval)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case <-tick.C:
			}
			// Never cancelled half-way: a RunPodSandbox its client gives up
			// is cleaned up by containerd with the networks it has loaded
			// then, which may no longer be the ones the pod got.
			_, _ = f.run(context.WithoutCancel(ctx), node, fmt.Sprintf("churn-%d", n), "default", map[string]string{"app": "churn"})
		}
	}()
	return func() { close(quit); <-done }
}

var _ = Describe("External endpoint mode", Label("external"), Ordered, func() {
	var (
		node      *containerd.Instance
		confDir   string
		binDir    string
		confFiles map[string]nodeFile
		binFiles  map[string]nodeFile
		foreign   *foreignPods
	)

	// The stand-in for a node's runtime: a containerd this test starts but
	// the harness under test does not manage, holding pods and a conf dir of
	// its own — a conflist owned by another user with old times and
	// extended attributes, and a symlink to it.
	BeforeAll(func(ctx SpecContext) {
		// Registered first, so it runs last: after the stand-in is gone.
		before := takeNodeState()
		DeferCleanup(func(ctx SpecContext) {
			expectNoResidue(ctx, before, "the node after external mode and the stand-in's teardown")
		}, NodeTimeout(residueSettle+time.Minute))
		var err error
		node, err = containerd.Start(ctx, containerd.Options{Options: daemon.Options{
			Name:         "node-containerd",
			BinDir:       containerd.CachedBinDir(containerd.DefaultCacheDir(), containerd.Containerd24Version),
			WorkDir:      filepath.Join(repoRoot, "_output", "work-node", fmt.Sprint(os.Getpid())),
			StateDir:     fmt.Sprintf("/run/cnifault/node-%d", os.Getpid()),
			CNIPluginDir: filepath.Join(repoRoot, "_output", "cni", "bin"),
			PauseBinary:  filepath.Join(repoRoot, "_output", "bin", "cnifault-pause"),
			Log:          GinkgoWriter,
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(node.Teardown(ctx)).To(Succeed())
		}, NodeTimeout(nodeRuntimeTimeout))

		confDir, binDir = node.CNIConfDir(), node.CNIBinDir()
		network := cniconf.Network{Name: "node-network", Bridge: fmt.Sprintf("cnfnode%d", os.Getpid()%1000),
			Subnet: "10.249.0.0/24", IPAMDataDir: filepath.Join(node.WorkDir(), "node-ipam")}
		node.OwnLink(network.Bridge)
		raw, err := cniconf.BridgeList(network).Bytes()
		Expect(err).NotTo(HaveOccurred())
		// The node's own file, written by an operator (uid 1000) two days
		// ago, labelled and annotated. Its access time is ahead of the
		// clock: under relatime no read (the runtime loads the file on
		// every reload, and each rename changes the file's ctime) moves an
		// access time newer than the change time and less than a day old, so
		// only a harness that sets it wrongly can change it.
		nodeConf := filepath.Join(confDir, "10-node.conflist")
		Expect(os.WriteFile(nodeConf, raw, 0o640)).To(Succeed())
		Expect(os.Lchown(nodeConf, 1000, 1000)).To(Succeed())
		Expect(unix.Lsetxattr(nodeConf, "user.cnifault-test", []byte("the operator's note"), 0)).To(Succeed())
		Expect(unix.Lsetxattr(nodeConf, "trusted.cnifault-test", []byte{0, 1, 2, 255}, 0)).To(Succeed())
		if err := unix.Lsetxattr(nodeConf, "security.selinux", []byte("system_u:object_r:etc_t:s0\x00"), 0); err != nil {
			GinkgoWriter.Printf("this kernel keeps no security.selinux here (%v); user.* and trusted.* stand in\n", err)
		}
		// A symlink to it, owned by the operator too, with an attribute
		// (user.* ones are not allowed on symlinks; trusted.* are).
		alias := filepath.Join(confDir, "50-node-alias.conflist")
		Expect(os.Symlink("10-node.conflist", alias)).To(Succeed())
		Expect(os.Lchown(alias, 1000, 1000)).To(Succeed())
		Expect(unix.Lsetxattr(alias, "trusted.cnifault-test", []byte("alias"), 0)).To(Succeed())
		modified := time.Now().Add(-48 * time.Hour).Truncate(time.Second).Add(123456789)
		read := time.Now().Add(6 * time.Hour).Truncate(time.Second).Add(987654321)
		setTimes(nodeConf, read, modified)
		setTimes(alias, read, modified)
		Eventually(func(g Gomega) {
			st, err := node.CRI().Network(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.HoldsNetwork("node-network")).To(BeTrue())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		// Pods of the node's workload, and one of another cnifault run
		// (its run-id label has another value).
		foreign = &foreignPods{}
		_, err = foreign.run(ctx, node, "unrelated", "default", map[string]string{"app": "unrelated"})
		Expect(err).NotTo(HaveOccurred())
		_, err = foreign.run(ctx, node, "other-run", "cnifault-other", map[string]string{runtimes.RunIDLabel: "other"})
		Expect(err).NotTo(HaveOccurred())
		confFiles, binFiles = nodeFiles(confDir, true), nodeFiles(binDir, false)
	}, NodeTimeout(nodeRuntimeTimeout))

	// checkUntouched asserts the node's pods, conf dir and plugins are as
	// they were, and the runtime loads the node's network again.
	checkUntouched := func(ctx SpecContext) {
		GinkgoHelper()
		Expect(nodeFiles(confDir, true)).To(Equal(confFiles), "the conf dir must come back exactly: type, target, owner, mode, times, attributes, inode")
		Expect(nodeFiles(binDir, false)).To(Equal(binFiles), "the bin dir must hold exactly the node's plugins again")
		foreign.mu.Lock()
		live := slices.Clone(foreign.live)
		foreign.mu.Unlock()
		for _, id := range live {
			st, err := node.CRI().PodSandboxStatus(ctx, id)
			Expect(err).NotTo(HaveOccurred(), "foreign pod %s must survive", id)
			Expect(st.GetState()).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY), "foreign pod %s/%s", st.GetMetadata().GetNamespace(), st.GetMetadata().GetName())
			Expect(st.GetNetwork().GetIp()).NotTo(BeEmpty(), "foreign pod %s/%s keeps its network", st.GetMetadata().GetNamespace(), st.GetMetadata().GetName())
		}
		pods, err := node.CRI().ListPodSandboxes(ctx)
		Expect(err).NotTo(HaveOccurred())
		var ids []string
		for _, p := range pods {
			ids = append(ids, p.GetId())
		}
		Expect(ids).To(ConsistOf(live), "exactly the foreign pods remain")
		Eventually(func(g Gomega) {
			net, err := node.CRI().Network(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(net.HoldsNetwork("node-network")).To(BeTrue(), "the runtime must load the node's network again")
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
	}

	When("preflight finds problems", func() {
		It("names each on its own line, exits 2 and changes nothing", func(ctx SpecContext) {
			code, out := runExternal(ctx, filepath.Join(repoRoot, "_output", "reports", "external-preflight"),
				"--runtime-endpoint", node.Endpoint(), "--cni-conf-dir", confDir, "--cni-bin-dir", GinkgoT().TempDir())
			Expect(code).To(Equal(report.ExitHarness), out)
			Expect(out).To(ContainSubstring("has no bridge plugin"))
			Expect(out).To(ContainSubstring("does not tell its sandbox image: pass --sandbox-image"))
			checkUntouched(ctx)
		}, SpecTimeout(suiteRunTimeout))
	})

	When("the runtime serves other pods, before and during the run", func() {
		var (
			r    *report.Report
			code int
			out  string
		)

		BeforeAll(func(ctx SpecContext) {
			reportDir := filepath.Join(repoRoot, "_output", "reports", "external")
			By("starting a foreign pod every second while the run goes on")
			stop := foreign.churn(ctx, node)
			code, out = runExternal(ctx, reportDir,
				"--runtime-endpoint", node.Endpoint(), "--cni-conf-dir", confDir, "--cni-bin-dir", binDir,
				"--sandbox-image", image.PauseRef)
			stop()
			foreign.mu.Lock()
			GinkgoWriter.Printf("foreign pods: %d live, %d failed to start while the run broke the network\n",
				len(foreign.live), len(foreign.failed))
			for _, e := range foreign.failed {
				GinkgoWriter.Printf("  %s\n", e)
			}
			foreign.mu.Unlock()
			var err error
			r, err = report.Read(filepath.Join(reportDir, "report.json"))
			Expect(err).NotTo(HaveOccurred(), out)
		}, NodeTimeout(suiteRunTimeout))

		managedOnly := managedOnlyIDs()

		It("runs the catalog with the verdicts of the same runtime managed", func() {
			Expect(code).To(Equal(report.ExitFail), out)
			Expect(r.Runtime.Managed).To(BeEmpty())
			for id, want := range expected["containerd-2.4"] {
				s := r.Scenario(id)
				Expect(s).NotTo(BeNil(), id)
				if slices.Contains(managedOnly, id) {
					Expect(s.Verdict).To(Equal(report.Skipped), "the harness must not kill a runtime it does not manage")
					Expect(s.Reason).To(ContainSubstring("external"))
					Expect(s.Lacks).To(Equal(report.NeedManaged), id)
					continue
				}
				expectSignature(s, want, "on the external containerd")
			}
		})

		It("gates to exit status 0 under the expectations file, as its managed twin does", func() {
			expectGatesClean(r, "on the external containerd")
		})

		It("runs in one process, given the default processes, and its report says why", func() {
			Expect(r.Processes).To(Equal(1))
			Expect(r.Serial).To(ContainSubstring("an external endpoint is one runtime with one CNI conf dir"))
			for _, s := range r.Scenarios {
				Expect(s.Process).To(BeZero(), s.ID)
			}
		})

		It("started foreign pods during the run", func() {
			foreign.mu.Lock()
			defer foreign.mu.Unlock()
			Expect(len(foreign.live)).To(BeNumerically(">", 4), "the run must have met pods started during it")
		})

		It("leaves every foreign pod Ready, and the conf dir and plugin dir as they were", func(ctx SpecContext) {
			checkUntouched(ctx)
		}, SpecTimeout(time.Minute))
	})

	When("the harness is killed outright", func() {
		It("leaves a record that preflight names and `cnifault restore` undoes", func(ctx SpecContext) {
			reportDir := filepath.Join(repoRoot, "_output", "reports", "external-killed")
			args := []string{"--runtime-endpoint", node.Endpoint(), "--cni-conf-dir", confDir, "--cni-bin-dir", binDir,
				"--sandbox-image", image.PauseRef}
			cmd := suiteCommand(ctx, "", reportDir, externalWorkRoot(), args...)
			out := gbytes.NewBuffer()
			cmd.Stdout, cmd.Stderr = out, io.MultiWriter(out, GinkgoWriter)
			stop := foreign.churn(ctx, node)
			Expect(cmd.Start()).To(Succeed())
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			DeferCleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})

			By("waiting until the run has set the conf dir aside and holds a pod of its own")
			Eventually(func() error {
				select {
				case <-exited:
					return StopTrying("the run exited before it started a scenario").Wrap(errors.New(string(out.Contents())))
				default:
				}
				if !regexp.MustCompile(`RUN +\S+`).Match(out.Contents()) {
					return errors.New("no scenario started yet")
				}
				return nil
			}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).Should(Succeed())
			records := external.FindRecords(externalWorkRoot())
			Expect(records).To(HaveLen(1))
			rec, err := external.ReadRecord(records[0])
			Expect(err).NotTo(HaveOccurred())
			Expect(rec.Kept).To(HaveLen(len(confFiles)), "the run set the node's conf files aside")
			// healthy-network's pod runs for a moment; the order is random.
			Eventually(func(g Gomega) {
				pods, err := node.CRI().ListPodSandboxes(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods).To(ContainElement(HaveField("Labels", HaveKeyWithValue(runtimes.RunIDLabel, rec.RunID))))
			}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(10 * time.Millisecond).Should(Succeed())

			By("killing the harness with SIGKILL")
			Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
			<-exited
			stop()
			Expect(filepath.Join(binDir, external.FaultPluginName)).To(BeAnExistingFile(), "a killed run cannot remove its plugin")

			By("running preflight again: it refuses and names the command")
			code, pre := runExternal(ctx, filepath.Join(repoRoot, "_output", "reports", "external-refused"), args...)
			Expect(code).To(Equal(report.ExitHarness), pre)
			Expect(pre).To(MatchRegexp("a killed cnifault run left the node changed .*: run `cnifault restore --work-dir %s` first", regexp.QuoteMeta(records[0])))

			By("running cnifault restore")
			rctx, cancel := context.WithTimeout(ctx, restoreTimeout)
			defer cancel()
			restore := exec.CommandContext(rctx, suiteBinary(), "restore", "--work-dir", records[0])
			restore.Dir = repoRoot
			rout, err := restore.CombinedOutput()
			GinkgoWriter.Printf("%s\n", rout)
			Expect(err).NotTo(HaveOccurred(), "cnifault restore:\n%s", rout)
			Expect(string(rout)).To(ContainSubstring("removed the run's pod"), "the killed run held a pod")

			By("inspecting the node")
			checkUntouched(ctx)
			Expect(records[0]).NotTo(BeADirectory(), "restore removes the run's work dir once it is undone")
			for _, l := range rec.Links {
				_, err := netlink.LinkByName(l)
				Expect(err).To(HaveOccurred(), "the run's link %s must be gone", l)
			}
			Expect(host.CgroupPaths(rec.CgroupParent)).To(BeEmpty(), "the run's cgroups must be gone")

			By("running cnifault restore again: nothing is left to do")
			again, err := exec.CommandContext(rctx, suiteBinary(), "restore", "--work-dir", externalWorkRoot()).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", again)
			Expect(string(again)).To(ContainSubstring("nothing to restore"))
		}, SpecTimeout(suiteRunTimeout+restoreTimeout))
	})
})
