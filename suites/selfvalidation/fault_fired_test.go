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

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/fixtures/image"
	"github.com/cnifault/cnifault/fixtures/report"
)

// neverFiresFamilies are the fault families whose scenarios start a pod
// (the STATUS ones ask no pod of a runtime without STATUS; GC's need to
// restart the runtime), and the control, which finds the node unusable;
// and the host-network shape, whose every scenario starts a host-network
// pod on the healthy network first (hostnetwork-status-not-ready among
// them, before it asks anything of STATUS).
var neverFiresFamilies = []string{"fault:add", "fault:partial", "fault:config", "fault:storm", "fault:sustained", "fault:teardown", report.LabelControl,
	"fault:ipam", "fault:hang", "fault:sandbox", "shape:hostnetwork"}

// neverFiresIDs are the catalog's scenarios of those families that an
// external run does not skip. The managed-only ones cannot run against
// the external endpoint this run uses: the managed run of the spec below
// proves theirs (neverFiresManagedIDs), node-reboot (fault:reboot) among
// them. Its fault is the harness's own reboot of the instance rather than
// a plugin's answer: that run proves it an error when its pods never
// started; fixtures/scenario's TestRebootSeen proves it an error whenever
// the reboot did not take (scenario.RebootSeen), on inventories where
// each thing a reboot must take survives it.
func neverFiresIDs() []string {
	var ids []string
	for _, row := range catalogRows() {
		if !row.has(report.LabelManagedOnly) && slices.ContainsFunc(neverFiresFamilies, row.has) {
			ids = append(ids, row.id)
		}
	}
	return ids
}

// neverFiresManagedIDs are the catalog's fault scenarios that only a
// managed run runs (managed-only, and a fault family): the NRI, runc,
// reboot, runtime-kill and bin-dir faults among them.
func neverFiresManagedIDs() []string {
	var ids []string
	for _, row := range catalogRows() {
		if row.has(report.LabelManagedOnly) && slices.ContainsFunc(row.labels, isFaultFamily) {
			ids = append(ids, row.id)
		}
	}
	return ids
}

func isFaultFamily(label string) bool { return strings.HasPrefix(label, "fault:") }

// startsPodFirst tells the scenarios whose fault meets a pod that started
// on a healthy network (a teardown fault, a reboot under running pods):
// where no pod starts, the pod that never started is their error.
func startsPodFirst(s report.Scenario) bool {
	return s.Has(report.LabelControl) || s.Has(report.LabelTeardown) || s.Has("fault:reboot") || s.Has("fault:restart") ||
		// A host-network scenario starts a host-network pod on the healthy
		// network first; a user-namespaced one probes the runtime with a
		// user-namespaced pod and, refused, a plain one; and
		// sandbox-image-missing a pod on the healthy network, to learn the
		// runtime's sandbox image.
		s.Has("shape:hostnetwork") || s.Has("shape:userns") || s.ID == "sandbox-image-missing"
}

// neverFiresManagedRuntime is the managed runtime of the managed
// never-fires run. containerd 1.7 ensures the sandbox image first thing
// in RunPodSandbox (pkg/cri/server/sandbox_run.go at v1.7.36), before the
// netns, CNI, NRI and runc, and it runs NRI plugins; 1.6 runs none (its
// NRI scenarios skip), and 2.x sets the pod's network up before its
// sandbox controller ensures the image (internal/cri/server/sandbox_run.go
// at v2.4.2), so a CNI fault would fire there.
const neverFiresManagedRuntime = "containerd-1.7"

// neverFiresCRIO is the CRI-O of the never-fires run. runPodSandbox
// (server/sandbox_run_linux.go at v1.36.3) creates the pod's storage from
// the pause image (the storage's CreatePodSandbox, which pulls an image it
// lacks: internal/storage/runtime.go) before the infra container,
// networkStart (CNI), NRI and the OCI runtime, so a config whose pause
// image is absent fails every call before any fault can meet it. Only
// waitForCNIPlugin comes earlier, and it holds a call only on a CRI-O that
// was never ready (lateConfigHeld).
const neverFiresCRIO = "crio-1.36"

// lateConfigHeld is the scenario whose fault CRI-O meets before the pause
// image: a CRI-O restarted with no network holds late-cni-config's calls
// in waitForCNIPlugin, ahead of the pod's storage, and logs so for each
// pod (the fault fired). Once the config appears they resume and fail on
// the image, and so do the retried pods and a fresh pod on the healthy
// network: the scenario's error is the node that cannot start pods.
const lateConfigHeld = "late-cni-config"

// testSandboxImageEnv is fixtures/cli's TestSandboxImageEnv (which this
// package may not import): the sandbox image a managed containerd's or
// CRI-O's config names in place of the pause image the harness imports.
const testSandboxImageEnv = "CNIFAULT_TEST_SANDBOX_IMAGE"

// A runtime whose RunPodSandbox fails before it ever reaches CNI (here: its
// sandbox image is gone, as with a mistyped --sandbox-image) fails every
// fault scenario "as expected" and leaves nothing. Judged on that alone,
// each would pass; the harness must call each an error, since the fault it
// injects never fired.
var _ = Describe("A fault scenario whose fault never fires", Label("fault-fired"), func() {
	It("is an error, never a pass", func(ctx SpecContext) {
		By("starting a containerd that does not have the sandbox image it is configured with")
		// 1.6 ensures the sandbox image first thing in RunPodSandbox
		// (pkg/cri/server/sandbox_run.go), before any netns or CNI; 2.x
		// does so in the controller's Start, after the network is set up.
		pid := os.Getpid()
		binDir, _, err := containerd.ResolveBinDir(containerd.Containerd16, containerd.DefaultCacheDir())
		Expect(err).NotTo(HaveOccurred())
		node, err := containerd.Start(ctx, containerd.Options{
			Options: daemon.Options{
				Name:         "node-containerd-no-image",
				BinDir:       binDir,
				WorkDir:      filepath.Join(repoRoot, "_output", "work-node", fmt.Sprintf("no-image-%d", pid)),
				StateDir:     fmt.Sprintf("/run/cnifault/noimg-%d", pid),
				CNIPluginDir: filepath.Join(repoRoot, "_output", "cni", "bin"),
				PauseBinary:  filepath.Join(repoRoot, "_output", "bin", "cnifault-pause"),
				Log:          GinkgoWriter,
			},
			// Its config names an image it does not have; the pause image
			// it imports is what the harness is told, so preflight passes.
			SandboxImage: "localhost/cnifault/absent:v1",
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(node.Teardown(ctx)).To(Succeed())
		}, NodeTimeout(nodeRuntimeTimeout))
		network := cniconf.Network{Name: "node-network", Bridge: fmt.Sprintf("cnfni%d", pid%1000),
			Subnet: "10.249.1.0/24", IPAMDataDir: filepath.Join(node.WorkDir(), "node-ipam")}
		node.OwnLink(network.Bridge)
		raw, err := cniconf.BridgeList(network).Bytes()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(node.CNIConfDir(), "10-node.conflist"), raw, 0o644)).To(Succeed())
		Eventually(func(g Gomega) {
			st, err := node.CRI().Network(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.HoldsNetwork(network.Name)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		By("running every fault family that starts a pod against it: ADD, partial ADD, config, storm, sustained, teardown")
		reportDir := filepath.Join(repoRoot, "_output", "reports", "fault-never-fires")
		Expect(os.RemoveAll(reportDir)).To(Succeed())
		cmd := suiteCommand(ctx, "", reportDir, filepath.Join(repoRoot, "_output", "work-fault-never-fires"),
			"--runtime-endpoint", node.Endpoint(), "--cni-conf-dir", node.CNIConfDir(), "--cni-bin-dir", node.CNIBinDir(),
			"--sandbox-image", image.PauseRef, "-ginkgo.label-filter="+strings.Join(neverFiresFamilies, " || "))
		out, _ := cmd.CombinedOutput()
		GinkgoWriter.Printf("%s\n", out)
		Expect(cmd.ProcessState.ExitCode()).To(Equal(report.ExitHarness), "%s", out)
		r, err := report.Read(filepath.Join(reportDir, "report.json"))
		Expect(err).NotTo(HaveOccurred(), "%s", out)

		By("finding every scenario an error that names the fault that never fired, or the pod that never started")
		ran := expectNeverFired(r, nil, nil)
		// The config faults are the case a state check missed: the conf
		// dir was empty and NetworkReady false, and RunPodSandbox failed —
		// on the sandbox image, not the config.
		Expect(ran).To(ConsistOf(neverFiresIDs()))
		Expect(r.NodeUnusable).NotTo(BeEmpty(), "the control did not run: nothing says the node is unusable")
	}, SpecTimeout(suiteRunTimeout+nodeRuntimeTimeout))

	// The managed-only faults (NRI's rejections, runc's, the reboot, the
	// runtime killed mid-ADD, the bin dir changed under a pod) are the
	// harness's own doing on a runtime it controls, which an external run
	// skips: the same proof needs a managed runtime whose config names a
	// sandbox image it does not have.
	It("is an error on a managed runtime too, for the faults only a managed run injects", func(ctx SpecContext) {
		By("running every managed-only fault scenario on a managed " + neverFiresManagedRuntime + " whose config names a sandbox image it does not have")
		r := runNeverFires(ctx, neverFiresManagedRuntime, "fault-never-fires-managed", report.LabelManagedOnly+" && /^fault:/")

		By("finding every scenario an error that names the fault that never fired, or the pod that never started")
		Expect(expectNeverFired(r, nil, nil)).To(ConsistOf(neverFiresManagedIDs()))
	}, SpecTimeout(suiteRunTimeout+nodeRuntimeTimeout))

	// CRI-O judges the config faults by its own words: a list it refuses
	// at load (missing-plugin-binary, malformed-cni-config), its conf dir's
	// missing network, its log. It logs a refusal at every reload of the
	// conf dir whether a call comes or not; only the call's own error, or
	// a log line naming the call's pod, shows the fault fired. So every
	// fault family, and the faults only a managed run injects, run on a
	// CRI-O whose every call fails on its absent pause image.
	It("is an error on CRI-O too, whose refusal of a list at load is no proof of the call", func(ctx SpecContext) {
		By("running every fault scenario that starts a pod, and every managed-only one, on a managed " + neverFiresCRIO + " whose config names a pause image it does not have")
		filter := "(" + strings.Join(neverFiresFamilies, " || ") + ") || (" + report.LabelManagedOnly + " && /^fault:/)"
		r := runNeverFires(ctx, neverFiresCRIO, "fault-never-fires-crio", filter)

		By("finding every scenario an error that names the fault that never fired, or the pod that never started, or the node that cannot start pods after CRI-O held the calls")
		ran := expectNeverFired(r, map[string]string{lateConfigHeld: "the node cannot start pods now"}, firesBeforeImageCRIO)
		Expect(ran).To(ConsistOf(append(neverFiresIDs(), neverFiresManagedIDs()...)))
		Expect(r.NodeUnusable).NotTo(BeEmpty(), "the control did not run: nothing says the node is unusable")
	}, SpecTimeout(suiteRunTimeout+nodeRuntimeTimeout))
})

// runNeverFires runs the scenarios filter selects on the managed runtime,
// its config naming a sandbox image it does not have, into the report dir
// _output/reports/<name>, and returns the report of the run, which must
// exit as one the harness could not run.
func runNeverFires(ctx SpecContext, runtime, name, filter string) *report.Report {
	GinkgoHelper()
	reportDir := filepath.Join(repoRoot, "_output", "reports", name)
	Expect(os.RemoveAll(reportDir)).To(Succeed())
	cmd := suiteCommand(ctx, runtime, reportDir, filepath.Join(repoRoot, "_output", "work-"+name), "-ginkgo.label-filter="+filter)
	cmd.Env = append(os.Environ(), testSandboxImageEnv+"=localhost/cnifault/absent:v1")
	out, _ := cmd.CombinedOutput()
	GinkgoWriter.Printf("%s\n", out)
	Expect(cmd.ProcessState.ExitCode()).To(Equal(report.ExitHarness), "%s", out)
	r, err := report.Read(filepath.Join(reportDir, "report.json"))
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	Expect(r.Runtime.Managed).To(Equal(runtime))
	return r
}

// firesBeforeImageCRIO are the scenarios whose fault CRI-O meets before it
// needs the pause image, so that they are judged even on a CRI-O whose
// pause image is gone: runPodSandbox (server/sandbox_run_linux.go at
// v1.36.3) looks up the pod's runtime handler (s.runtimeHandler) before it
// creates the pod's storage from the pause image, and refuses an unknown
// one there. (containerd 1.6 and 1.7 ensure the sandbox image first,
// pkg/cri/server/sandbox_run.go RunPodSandbox before getSandboxRuntime:
// there the fault never fires.) Each must pass, with what fired the
// runtime's refusal naming the handler.
var firesBeforeImageCRIO = map[string]string{"unknown-runtime-handler": "cnifault-no-such-handler"}

// expectNeverFired asserts that every scenario of r that ran is an error:
// one whose fault needs a pod started first names the pod that did not
// start, every other the fault that never fired, with nothing fired; a
// scenario of fired is the exception whose fault the runtime meets before
// the call fails, and its error names what fired says; a scenario of
// before is one whose fault the runtime meets before it needs the image
// at all, and passes with what before says fired. It returns the ids that
// ran.
func expectNeverFired(r *report.Report, fired, before map[string]string) []string {
	GinkgoHelper()
	var ran []string
	for _, s := range r.Scenarios {
		if s.Verdict == report.Skipped {
			continue
		}
		ran = append(ran, s.ID)
		if what, ok := before[s.ID]; ok {
			Expect(s.Verdict).To(Equal(report.Pass), "%s: %+v", s.ID, s)
			Expect(s.FaultsFired).To(ContainElement(ContainSubstring(what)), s.ID)
			continue
		}
		Expect(s.Verdict).To(Equal(report.Error), "%s: %+v", s.ID, s)
		if why, ok := fired[s.ID]; ok {
			Expect(s.Failure).To(ContainSubstring(why), s.ID)
			Expect(s.FaultsFired).NotTo(BeEmpty(), s.ID)
			continue
		}
		if startsPodFirst(s) || s.Has("fault:dual-stack") {
			// A live pod's faults break a pod that never started; a
			// full dual-stack range is full only once a healthy pod
			// holds its address.
			Expect(s.Failure).To(ContainSubstring("the pod did not start on a healthy network"), s.ID)
		} else {
			Expect(s.Failure).To(ContainSubstring("the injected fault never fired"), s.ID)
			Expect(s.FaultsFired).To(BeEmpty(), s.ID)
		}
	}
	return ran
}
