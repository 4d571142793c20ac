package selfvalidation_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/crio"
	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// External mode on a CRI-O the harness did not start: the stand-in is a
// CRI-O this test brings up, with a network and a pod of the node's own.
// The harness reads CRI-O's running config over its socket (its monitors'
// marker, netns dir, storage roots) and CRI-O's log for the network it
// loaded, and must judge as it judges a managed CRI-O: the same verdicts,
// the same leak kinds, every kind inspected. It runs against both ends of
// the managed lines: 1.34's ocicni logs every reload, and from 1.35 on a
// reload that finds no network ends without a word, which the harness must
// make the watcher tell (crio.NetworkLog.Sync) in the node's conf dir.
var _ = Describe("External endpoint mode on CRI-O", Label("external"), func() {
	for _, line := range []string{crio.Crio134, crio.ManagedNames[len(crio.ManagedNames)-1]} {
		Context("when the node runs "+line, Ordered, func() { externalCRIO(line) })
	}
})

func externalCRIO(line string) {
	var (
		node      *crio.Instance
		confDir   string
		confFiles map[string]nodeFile
		nodePod   string
		code      int
		out       string
		r         *report.Report
	)
	// tag keeps the two nodes' dirs and bridges apart: "134", "136".
	tag := strings.ReplaceAll(strings.TrimPrefix(line, "crio-"), ".", "")

	BeforeAll(func(ctx SpecContext) {
		before := takeNodeState()
		DeferCleanup(func(ctx SpecContext) {
			expectNoResidue(ctx, before, "the node after external mode on CRI-O and the stand-in's teardown")
		}, NodeTimeout(residueSettle+time.Minute))
		var err error
		l, ok := crio.LineOf(line)
		Expect(ok).To(BeTrue(), line)
		node, err = crio.Start(ctx, crio.Options{
			Options: daemon.Options{
				Name:         "node-crio",
				BinDir:       crio.CachedBinDir(runtimes.DefaultCacheDir(), l.Version),
				WorkDir:      filepath.Join(repoRoot, "_output", "work-node-crio", tag+"-"+fmt.Sprint(os.Getpid())),
				StateDir:     fmt.Sprintf("/run/cnifault/nodecrio%s-%d", tag, os.Getpid()),
				CNIPluginDir: filepath.Join(repoRoot, "_output", "cni", "bin"),
				PauseBinary:  filepath.Join(repoRoot, "_output", "bin", "cnifault-pause"),
				Log:          GinkgoWriter,
			},
			RuncWrapper: filepath.Join(repoRoot, "_output", "bin", "cnifault-runc-wrapper"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(node.Teardown(ctx)).To(Succeed())
		}, NodeTimeout(nodeRuntimeTimeout))

		confDir = node.CNIConfDir()
		network := cniconf.Network{Name: "node-network", Bridge: fmt.Sprintf("cnfcrio%s-%d", tag, os.Getpid()%1000),
			Subnet: "10.248.0.0/24", IPAMDataDir: filepath.Join(node.WorkDir(), "node-ipam")}
		node.OwnLink(network.Bridge)
		raw, err := cniconf.BridgeList(network).Bytes()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(confDir, "10-node.conflist"), raw, 0o644)).To(Succeed())
		Expect(node.NetworkConfigChanged(ctx)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := node.Network(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.HoldsNetwork("node-network")).To(BeTrue())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		nodePod, err = node.CRI().RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "unrelated", Namespace: "default", Uid: fmt.Sprintf("node-crio%s-%d", tag, os.Getpid())},
			Linux:    &runtimeapi.LinuxPodSandboxConfig{CgroupParent: node.CgroupParent()},
		})
		Expect(err).NotTo(HaveOccurred())
		confFiles = nodeFiles(confDir, false)

		reportDir := filepath.Join(repoRoot, "_output", "reports", "external-"+line)
		code, out = runExternal(ctx, reportDir,
			"--runtime-endpoint", "unix://"+node.Paths().Listen, "--cni-conf-dir", confDir, "--cni-bin-dir", node.CNIBinDir(),
			"--runtime-log", node.LogPath())
		r, err = report.Read(filepath.Join(reportDir, "report.json"))
		Expect(err).NotTo(HaveOccurred(), out)
	}, NodeTimeout(nodeRuntimeTimeout+suiteRunTimeout))

	managedOnly := managedOnlyIDs()

	It("runs the catalog with the verdicts and leak kinds of the same CRI-O managed", func() {
		Expect(code).To(Equal(report.ExitFail), out)
		Expect(r.Runtime.Managed).To(BeEmpty())
		for id, want := range expected[line] {
			s := r.Scenario(id)
			Expect(s).NotTo(BeNil(), id)
			if slices.Contains(managedOnly, id) {
				Expect(s.Verdict).To(Equal(report.Skipped), "the harness must not restart a runtime it does not manage")
				Expect(s.Lacks).To(Equal(report.NeedManaged), id)
				continue
			}
			expectSignature(s, want, "on the external CRI-O")
		}
	})

	It("gates to exit status 0 under the expectations file, as its managed twin does", func() {
		expectGatesClean(r, "on the external CRI-O")
	})

	It("inspects every kind, CRI-O's processes and its shm and storage mounts too", func() {
		for _, s := range r.Scenarios {
			if s.Verdict == report.Skipped || slices.Contains(withoutInventory, s.ID) {
				continue
			}
			Expect(s.Coverage).NotTo(BeNil(), s.ID)
			Expect(s.Coverage.NotInspected).To(BeEmpty(), s.ID)
		}
		// add-hang-deadline leaks the pod's shm on every CRI-O line: found
		// here only by inspecting the storage roots CRI-O's config names.
		Expect(report.LeakKinds(r.Scenario("add-hang-deadline").Leaks)).To(ContainElement("mount"))
	})

	It("leaves the node's pod Ready and its conf dir as it was", func(ctx SpecContext) {
		Expect(nodeFiles(confDir, false)).To(Equal(confFiles), "the conf dir must come back exactly")
		st, err := node.CRI().PodSandboxStatus(ctx, nodePod)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.GetState()).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
		Expect(st.GetNetwork().GetIp()).NotTo(BeEmpty())
		pods, err := node.CRI().ListPodSandboxes(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(pods).To(HaveLen(1), "exactly the node's pod remains")
	}, SpecTimeout(time.Minute))
}
