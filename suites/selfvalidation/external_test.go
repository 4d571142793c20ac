package selfvalidation_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/image"
	"github.com/cnifault/cnifault/fixtures/report"
)

// nodeRuntimeTimeout bounds bringing up and tearing down the stand-in for a
// node's own runtime.
const nodeRuntimeTimeout = 2 * time.Minute

// fileState is a file as the node had it.
type fileState struct {
	Mode    os.FileMode
	ModTime time.Time
	Content string
}

func dirState(dir string) map[string]fileState {
	GinkgoHelper()
	entries, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]fileState{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		info, err := os.Lstat(p)
		Expect(err).NotTo(HaveOccurred())
		st := fileState{Mode: info.Mode(), ModTime: info.ModTime()}
		if info.Mode().IsRegular() {
			raw, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			st.Content = string(raw)
		}
		out[e.Name()] = st
	}
	return out
}

// runExternal runs the suite against an endpoint and returns its exit code
// and output.
func runExternal(ctx context.Context, reportDir string, args ...string) (int, string) {
	GinkgoHelper()
	cmd := suiteCommand(ctx, "", reportDir, filepath.Join(repoRoot, "_output", "work-external"), args...)
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("%s\n", out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	Expect(err).NotTo(HaveOccurred())
	return 0, string(out)
}

var _ = Describe("External endpoint mode", Label("external"), Ordered, func() {
	var (
		node      *containerd.Instance
		nodePod   string
		confDir   string
		binDir    string
		confFiles map[string]fileState
		binFiles  map[string]fileState
	)

	// The stand-in for a node's runtime: a containerd this test starts but
	// the harness under test does not manage, holding a pod and a conflist
	// of its own.
	BeforeAll(func(ctx SpecContext) {
		// Registered first, so it runs last: after the stand-in is gone.
		before := takeNodeState()
		DeferCleanup(func() {
			Expect(takeNodeState()).To(matchNodeState(before), "the node after external mode and the stand-in's teardown")
		})
		var err error
		node, err = containerd.Start(ctx, containerd.Options{
			Name:         "node-containerd",
			BinDir:       filepath.Join(containerd.DefaultCacheDir(), "containerd-"+containerd.Containerd24Version, "bin"),
			WorkDir:      filepath.Join(repoRoot, "_output", "work-node", fmt.Sprint(os.Getpid())),
			StateDir:     fmt.Sprintf("/run/cnifault/node-%d", os.Getpid()),
			CNIPluginDir: filepath.Join(repoRoot, "_output", "cni", "bin"),
			PauseBinary:  filepath.Join(repoRoot, "_output", "bin", "cnifault-pause"),
			Log:          GinkgoWriter,
		})
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
		// The node's own file, written as an operator would, two days ago.
		nodeConf := filepath.Join(confDir, "10-node.conflist")
		Expect(os.WriteFile(nodeConf, raw, 0o640)).To(Succeed())
		old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
		Expect(os.Chtimes(nodeConf, old, old)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := node.CRI().Network(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.HoldsNetwork("node-network")).To(BeTrue())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		nodePod, err = node.CRI().RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "unrelated", Namespace: "default", Uid: "unrelated-uid"},
			Labels:   map[string]string{"app": "unrelated"},
			Linux:    &runtimeapi.LinuxPodSandboxConfig{CgroupParent: node.CgroupParent()},
		})
		Expect(err).NotTo(HaveOccurred())
		confFiles, binFiles = dirState(confDir), dirState(binDir)
	}, NodeTimeout(nodeRuntimeTimeout))

	// checkUntouched asserts the node's pod, conflist and plugins are as they were.
	checkUntouched := func(ctx SpecContext) {
		GinkgoHelper()
		Expect(dirState(confDir)).To(Equal(confFiles), "the conf dir must be restored exactly")
		Expect(dirState(binDir)).To(Equal(binFiles), "the bin dir must hold exactly the node's plugins again")
		st, err := node.CRI().PodSandboxStatus(ctx, nodePod)
		Expect(err).NotTo(HaveOccurred(), "the unrelated pod must survive")
		Expect(st.GetState()).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
		Expect(st.GetNetwork().GetIp()).To(HavePrefix("10.249.0."))
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

	When("the runtime holds an unrelated pod and conflist", func() {
		var (
			r    *report.Report
			code int
			out  string
		)

		BeforeAll(func(ctx SpecContext) {
			reportDir := filepath.Join(repoRoot, "_output", "reports", "external")
			code, out = runExternal(ctx, reportDir,
				"--runtime-endpoint", node.Endpoint(), "--cni-conf-dir", confDir, "--cni-bin-dir", binDir,
				"--sandbox-image", image.PauseRef)
			var err error
			r, err = report.Read(filepath.Join(reportDir, "report.json"))
			Expect(err).NotTo(HaveOccurred(), out)
		}, NodeTimeout(suiteRunTimeout))

		It("runs the catalog with the verdicts of the same runtime managed", func() {
			Expect(code).To(Equal(report.ExitFail), out)
			Expect(r.Runtime.Managed).To(BeEmpty())
			for id, want := range expected["containerd-2.4"] {
				s := r.Scenario(id)
				Expect(s).NotTo(BeNil(), id)
				if id == "runtime-killed-mid-add" {
					Expect(s.Verdict).To(Equal(report.Skipped), "the harness must not kill a runtime it does not manage")
					Expect(s.Reason).To(ContainSubstring("external"))
					continue
				}
				Expect(s.Verdict).To(Equal(want.verdict), "%s: %+v", id, *s)
				Expect(report.LeakKinds(s.Leaks)).To(Equal(want.leaks), "%s: %+v", id, *s)
			}
		})

		It("leaves the unrelated pod, the conflist and the plugin dir untouched", func(ctx SpecContext) {
			checkUntouched(ctx)
			pods, err := node.CRI().ListPodSandboxes(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(pods).To(HaveLen(1), "only the unrelated pod may remain")
		}, SpecTimeout(time.Minute))
	})
})
