package selfvalidation_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/daemon"
	"github.com/cnifault/cnifault/fixtures/external"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/image"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/sonobuoy"
	"github.com/cnifault/cnifault/internal/testenv"
)

// The simulated DaemonSet: what Sonobuoy's plugin pod does on a node
// (hack/sonobuoy/cnifault-plugin.yaml), as closely as one machine allows.
// Two managed containerd 2.4 instances: one is the node's runtime (the
// target, as in external mode), the other the runtime that runs the
// plugin's pod — the harness's image (make image) imported into it, a
// privileged container with the host's PID, network and IPC namespaces
// and the host's root at /host, the command line and environment of the
// plugin definition, and Sonobuoy's results dir as a host dir.
//
// Two departures from a cluster, both because of this machine: PID 1 here
// is the VM's init, which refuses even root a look at its namespaces
// (reading /proc/1/ns/mnt is denied), so the run enters the mount
// namespace of the node runtime's daemon (--host-pid), a process of the
// host's own view as the node's init is; and / is a private mount here
// (no systemd made it shared), so the host root is bound without
// HostToContainer propagation, which the runtime refuses on a private
// mount.

// fleetScenarios are the few scenarios the simulated pod runs: a control,
// a fault that containerd 2.4 passes and one it fails with leaks, and one
// whose ADD hangs for seconds, during which the killed variant kills the
// container (killAt).
var fleetScenarios = []string{"healthy-network", "add-error", "partial-add-del-fails", killAt}

// killAt is the scenario during whose hung ADD the container is killed:
// the hang (past a 3 s deadline) keeps the run in the middle of a
// scenario, its conf dir set aside and its plugin installed, for longer
// than the poll that sees it started takes.
const killAt = "add-hang-deadline"

func fleetLabelFilter() string {
	var terms []string
	for _, id := range fleetScenarios {
		terms = append(terms, "scenario:"+id)
	}
	return "--ginkgo.label-filter=" + strings.Join(terms, " || ")
}

// pluginDefinition is what the simulation takes from the plugin
// definition: its container's command line and environment.
type pluginDefinition struct {
	Spec struct {
		Command []string `json:"command"`
		Args    []string `json:"args"`
		Env     []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"env"`
	} `json:"spec"`
}

func readPluginDefinition() pluginDefinition {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "hack", "sonobuoy", "cnifault-plugin.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var def pluginDefinition
	Expect(yaml.Unmarshal(raw, &def)).To(Succeed())
	Expect(def.Spec.Command).NotTo(BeEmpty())
	return def
}

// pluginResultsDir is Sonobuoy's results dir in the plugin's container.
const pluginResultsDir = "/tmp/sonobuoy/results"

// pluginPod is the plugin's pod on the pod runtime.
type pluginPod struct {
	runtime    *containerd.Instance
	id         string
	logDir     string
	resultsDir string // on the host, mounted at pluginResultsDir
}

// hostNamespaces are the plugin pod's: the host's PID, network and IPC.
var hostNamespaces = &runtimeapi.NamespaceOption{
	Network: runtimeapi.NamespaceMode_NODE,
	Pid:     runtimeapi.NamespaceMode_NODE,
	Ipc:     runtimeapi.NamespaceMode_NODE,
}

func runPluginPod(ctx context.Context, rt *containerd.Instance, name string) *pluginPod {
	GinkgoHelper()
	p := &pluginPod{runtime: rt, logDir: GinkgoT().TempDir(), resultsDir: GinkgoT().TempDir()}
	id, err := rt.CRI().RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "sonobuoy", Uid: fmt.Sprintf("%s-%d", name, os.Getpid())},
		LogDirectory: p.logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    rt.CgroupParent(),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true, NamespaceOptions: hostNamespaces},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	p.id = id
	DeferCleanup(func(ctx SpecContext) {
		Expect(rt.CRI().StopPodSandbox(ctx, id)).To(Succeed())
		Expect(rt.CRI().RemovePodSandbox(ctx, id)).To(Succeed())
	}, NodeTimeout(time.Minute))
	return p
}

// startPlugin creates and starts the plugin's container (its attempt-th
// start in the pod, as the kubelet restarts it) with the plugin
// definition's command, args and environment, and extra args after them.
func (p *pluginPod) startPlugin(ctx context.Context, attempt uint32, extra ...string) string {
	GinkgoHelper()
	def := readPluginDefinition()
	var envs []*runtimeapi.KeyValue
	for _, e := range def.Spec.Env {
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	c, err := p.runtime.CRI().Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: p.id,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "plugin", Attempt: attempt},
			Image:    &runtimeapi.ImageSpec{Image: image.HarnessRef},
			Command:  def.Spec.Command,
			Args:     append(append([]string{}, def.Spec.Args...), extra...),
			Envs:     envs,
			Mounts: []*runtimeapi.Mount{
				{ContainerPath: pluginResultsDir, HostPath: p.resultsDir},
				{ContainerPath: "/host", HostPath: "/", Readonly: true},
			},
			LogPath: p.logPath(attempt),
			Linux: &runtimeapi.LinuxContainerConfig{
				SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true, NamespaceOptions: hostNamespaces},
			},
		},
		SandboxConfig: &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: "plugin"},
			LogDirectory: p.logDir,
			Linux: &runtimeapi.LinuxPodSandboxConfig{
				CgroupParent:    p.runtime.CgroupParent(),
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true, NamespaceOptions: hostNamespaces},
			},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	id := c.GetContainerId()
	DeferCleanup(func(ctx SpecContext) {
		_, _ = p.runtime.CRI().Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
		_, err := p.runtime.CRI().Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(time.Minute))
	_, err = p.runtime.CRI().Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	Expect(err).NotTo(HaveOccurred(), "the plugin's container must start:\n%s", p.log(attempt))
	return id
}

func (p *pluginPod) logPath(attempt uint32) string { return fmt.Sprintf("plugin-%d.log", attempt) }

// log is the container's output, without the CRI log format's prefixes.
func (p *pluginPod) log(attempt uint32) string {
	raw, _ := os.ReadFile(filepath.Join(p.logDir, p.logPath(attempt)))
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.SplitN(line, " ", 4); len(f) == 4 {
			b.WriteString(f[3] + "\n")
		}
	}
	return b.String()
}

// state is the container's state and exit code.
func (p *pluginPod) state(ctx context.Context, id string) (runtimeapi.ContainerState, int32) {
	GinkgoHelper()
	st, err := p.runtime.CRI().Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	Expect(err).NotTo(HaveOccurred())
	return st.GetStatus().GetState(), st.GetStatus().GetExitCode()
}

// awaitHandOver waits until the container has written done, failing at
// once if it exited first, and returns the report it handed over.
func (p *pluginPod) awaitHandOver(ctx context.Context, id string, attempt uint32) *report.Report {
	GinkgoHelper()
	done := filepath.Join(p.resultsDir, sonobuoy.DoneFile)
	Eventually(func() error {
		if _, err := os.Stat(done); err == nil {
			return nil
		}
		if st, code := p.state(ctx, id); st == runtimeapi.ContainerState_CONTAINER_EXITED {
			return StopTrying(fmt.Sprintf("the plugin exited (%d) before it handed over:\n%s", code, p.log(attempt)))
		}
		return errors.New("no done file yet")
	}).WithContext(ctx).WithTimeout(suiteRunTimeout).WithPolling(time.Second).Should(Succeed())
	named, err := os.ReadFile(done)
	Expect(err).NotTo(HaveOccurred())
	Expect(string(named)).To(Equal(pluginResultsDir+"/"+sonobuoy.Archive), "done names the archive as the worker sees it, in the container")
	files := untarGz(filepath.Join(p.resultsDir, sonobuoy.Archive))
	Expect(files).To(HaveKey("junit.xml"), "the plugin definition's result file")
	raw, ok := files["report.json"]
	Expect(ok).To(BeTrue(), "the archive holds the run's report: %v\n%s", keysOf(files), p.log(attempt))
	path := filepath.Join(GinkgoT().TempDir(), "report.json")
	Expect(os.WriteFile(path, raw, 0o644)).To(Succeed())
	r, err := report.Read(path)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// stopPlugin deletes the pod's container as the kubelet does, SIGTERM
// first, and returns its exit code.
func (p *pluginPod) stopPlugin(ctx context.Context, id string) int32 {
	GinkgoHelper()
	_, err := p.runtime.CRI().Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 60})
	Expect(err).NotTo(HaveOccurred())
	st, code := p.state(ctx, id)
	Expect(st).To(Equal(runtimeapi.ContainerState_CONTAINER_EXITED))
	return code
}

func untarGz(path string) map[string][]byte {
	GinkgoHelper()
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	gz, err := gzip.NewReader(f)
	Expect(err).NotTo(HaveOccurred())
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		Expect(err).NotTo(HaveOccurred())
		var b bytes.Buffer
		_, err = io.Copy(&b, tr)
		Expect(err).NotTo(HaveOccurred())
		files[h.Name] = b.Bytes()
	}
}

func keysOf(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// ranScenarios are the ids of r's scenarios that were not skipped (a
// report lists the whole catalog).
func ranScenarios(r *report.Report) []string {
	var ids []string
	for _, s := range r.Scenarios {
		if s.Verdict != report.Skipped {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// expectSameVerdicts asserts that got and want both judged every
// scenario as containerd 2.4 is pinned, signature and all (either side of
// a race it is pinned with).
func expectSameVerdicts(got, want *report.Report) {
	GinkgoHelper()
	Expect(ranScenarios(got)).To(ConsistOf(fleetScenarios), "the scenarios the label filter selects, the others skipped")
	for _, id := range fleetScenarios {
		g, w := got.Scenario(id), want.Scenario(id)
		Expect(g).NotTo(BeNil(), id)
		Expect(w).NotTo(BeNil(), id)
		pin := expected["containerd-2.4"][id]
		expectSignature(g, pin, "in node mode")
		expectSignature(w, pin, "in external mode")
	}
}

var _ = Describe("The Sonobuoy plugin's pod, simulated on one machine", Label("fleet"), Ordered, func() {
	var (
		node, podRuntime *containerd.Instance
		confFiles        map[string]nodeFile
		binFiles         map[string]nodeFile
		hostRun          *report.Report
		externalCode     int
		workRoot         string
	)

	startInstance := func(ctx SpecContext, name string) *containerd.Instance {
		GinkgoHelper()
		inst, err := containerd.Start(ctx, containerd.Options{Options: daemon.Options{
			Name:         name,
			BinDir:       containerd.CachedBinDir(containerd.DefaultCacheDir(), containerd.Containerd24Version),
			WorkDir:      filepath.Join(repoRoot, "_output", "work-fleet-runtimes", name),
			StateDir:     filepath.Join(stateRoot, name),
			CNIPluginDir: filepath.Join(repoRoot, "_output", "cni", "bin"),
			PauseBinary:  filepath.Join(repoRoot, "_output", "bin", "cnifault-pause"),
			Log:          GinkgoWriter,
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(inst.Teardown(ctx)).To(Succeed())
		}, NodeTimeout(nodeRuntimeTimeout))
		return inst
	}

	BeforeAll(func(ctx SpecContext) {
		if testenv.Chrooted(GinkgoT()) {
			Skip("this self-validation runs chrooted (as ../shared/tools/fresh-debian runs CI): node mode enters the node runtime's mount namespace, and setns moves it to that namespace's own root, outside the chroot the node's runtime runs in, so the simulated pod could never find the node's view here")
		}
		archive := filepath.Join(repoRoot, "_output", "cnifault-image.oci.tar")
		Expect(archive).To(BeAnExistingFile(), "make test builds the harness's image (make image)")
		before := takeNodeState()
		DeferCleanup(func(ctx SpecContext) {
			expectNoResidue(ctx, before, "the node after the simulated plugin pods and both runtimes' teardown")
		}, NodeTimeout(residueSettle+time.Minute))
		nodeName, podName := fmt.Sprintf("fleetnode-%d", os.Getpid()), fmt.Sprintf("fleetpod-%d", os.Getpid())
		own.mu.Lock()
		own.tokens[nodeName], own.tokens[podName] = true, true
		own.mu.Unlock()

		By("bringing up the node's runtime, with a network of its own")
		node = startInstance(ctx, nodeName)
		network := cniconf.Network{Name: "node-network", Bridge: fmt.Sprintf("cnffleet%d", os.Getpid()%1000),
			Subnet: "10.248.0.0/24", IPAMDataDir: filepath.Join(node.WorkDir(), "node-ipam")}
		node.OwnLink(network.Bridge)
		raw, err := cniconf.BridgeList(network).Bytes()
		Expect(err).NotTo(HaveOccurred())
		nodeConf := filepath.Join(node.CNIConfDir(), "10-node.conflist")
		Expect(os.WriteFile(nodeConf, raw, 0o640)).To(Succeed())
		// Read ahead of the clock, as external_test.go's: no load by the
		// runtime moves it, only a harness that sets it wrongly.
		setTimes(nodeConf, time.Now().Add(6*time.Hour).Truncate(time.Second), time.Now().Add(-48*time.Hour).Truncate(time.Second))
		Eventually(func(g Gomega) {
			st, err := node.CRI().Network(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.HoldsNetwork("node-network")).To(BeTrue())
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		confFiles, binFiles = nodeFiles(node.CNIConfDir(), true), nodeFiles(node.CNIBinDir(), false)

		By("bringing up the pod's runtime and importing the harness's image into it")
		podRuntime = startInstance(ctx, podName)
		out, err := exec.CommandContext(ctx, filepath.Join(podRuntime.BinDir(), "ctr"), "--address", podRuntime.Address(),
			"-n", "k8s.io", "images", "import", archive).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "ctr images import: %s", out)
		Eventually(func() (bool, error) { return podRuntime.CRI().HasImage(ctx, image.HarnessRef) }).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())

		By("running the scenarios in external mode from the host, the verdicts to match")
		reportDir := filepath.Join(repoRoot, "_output", "reports", "fleet-external")
		externalCode, _ = runExternal(ctx, reportDir, "--runtime-endpoint", node.Endpoint(),
			"--cni-conf-dir", node.CNIConfDir(), "--cni-bin-dir", node.CNIBinDir(), "--sandbox-image", image.PauseRef, fleetLabelFilter())
		hostRun, err = report.Read(filepath.Join(reportDir, "report.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(ranScenarios(hostRun)).To(ConsistOf(fleetScenarios), "the scenarios the label filter selects, the others skipped")
		// A work root of the repo's, whose run dirs the residue check
		// samples for the runs' ids.
		workRoot = filepath.Join(repoRoot, "_output", "work-fleet")
	}, NodeTimeout(2*nodeRuntimeTimeout+suiteRunTimeout))

	// nodeArgs are what the simulation adds to the plugin definition's
	// command line: the node's runtime (here not on a default socket), its
	// sandbox image, the host process to enter, the work dir under the
	// repo (the residue check's), and the scenarios.
	nodeArgs := func() []string {
		return []string{"--runtime-endpoint=" + node.Endpoint(), "--sandbox-image=" + image.PauseRef,
			fmt.Sprintf("--host-pid=%d", node.PID()), "--work-dir=" + workRoot, fleetLabelFilter()}
	}

	// checkNodeAsItWas: the node's conf dir and plugins are as before, no
	// record of a run is left, and the runtime holds no pod of the runs.
	checkNodeAsItWas := func(ctx SpecContext) {
		GinkgoHelper()
		Expect(nodeFiles(node.CNIConfDir(), true)).To(Equal(confFiles), "the conf dir must come back exactly")
		Expect(nodeFiles(node.CNIBinDir(), false)).To(Equal(binFiles), "the bin dir must hold exactly the node's plugins again")
		Expect(external.FindRecords(workRoot)).To(BeEmpty(), "no record of a run is left")
		pods, err := node.CRI().ListPodSandboxes(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(pods).To(BeEmpty(), "the node's runtime holds no pod of the runs")
	}

	It("finds the node's runtime, runs there as external mode does from the host, and hands over to Sonobuoy's worker", func(ctx SpecContext) {
		pod := runPluginPod(ctx, podRuntime, "cnifault-plugin")
		id := pod.startPlugin(ctx, 0, nodeArgs()...)
		got := pod.awaitHandOver(ctx, id, 0)
		log := pod.log(0)
		GinkgoWriter.Printf("the plugin's log:\n%s\n", log)
		Expect(log).To(ContainSubstring("node mode: starting the run in the mount namespace of PID %d", node.PID()))
		Expect(log).To(MatchRegexp(`node mode: runtime containerd v?%s\S* at %s \(given\)`,
			regexp.QuoteMeta(strings.TrimPrefix(containerd.Containerd24Version, "v")), regexp.QuoteMeta(node.Endpoint())))
		Expect(log).To(ContainSubstring("node mode: CNI conf dir %s, bin dir %s (containerd's CRI config (verbose CRI Status))", node.CNIConfDir(), node.CNIBinDir()))
		expectSameVerdicts(got, hostRun)

		By("deleting the pod's container as the kubelet does: it exits with the run's status")
		Expect(pod.stopPlugin(ctx, id)).To(BeEquivalentTo(externalCode))
		checkNodeAsItWas(ctx)
	}, SpecTimeout(suiteRunTimeout+2*time.Minute))

	It("killed mid-run and started again, undoes the killed run first, then runs and hands over", func(ctx SpecContext) {
		pod := runPluginPod(ctx, podRuntime, "cnifault-plugin-killed")
		id := pod.startPlugin(ctx, 0, nodeArgs()...)

		By("waiting until the run has set the conf dir aside and started " + killAt)
		started := regexp.MustCompile(`RUN +` + killAt)
		Eventually(func() error {
			if st, code := pod.state(ctx, id); st == runtimeapi.ContainerState_CONTAINER_EXITED {
				return StopTrying(fmt.Sprintf("the plugin exited (%d) before it started %s:\n%s", code, killAt, pod.log(0)))
			}
			if !started.MatchString(pod.log(0)) || len(external.FindRecords(workRoot)) == 0 {
				return errors.New(killAt + " not started yet")
			}
			return nil
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())

		By("killing the container outright, as a pod deleted past its grace period")
		_, err := podRuntime.CRI().Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
		Expect(err).NotTo(HaveOccurred())
		// The run in the host's view is in the container's cgroup: the
		// shim kills every process of a container without a PID
		// namespace of its own once its first process is gone.
		Eventually(func() []string {
			table, _ := host.ReadProcTable()
			var left []string
			for _, p := range table {
				if !p.Zombie() && slices.Contains(p.Argv, "--work-dir="+workRoot) {
					left = append(left, fmt.Sprintf("%d %v", p.PID, p.Argv))
				}
			}
			return left
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeEmpty(), "the container's processes, the run in the host's view among them, are killed")
		Expect(external.FindRecords(workRoot)).To(HaveLen(1), "the killed run left its record")
		Expect(filepath.Join(node.CNIBinDir(), external.FaultPluginName)).To(BeAnExistingFile(), "a killed run cannot remove its plugin")
		Expect(filepath.Join(pod.resultsDir, sonobuoy.DoneFile)).NotTo(BeAnExistingFile())

		By("starting the container again in the same pod, as the kubelet restarts it")
		again := pod.startPlugin(ctx, 1, nodeArgs()...)
		got := pod.awaitHandOver(ctx, again, 1)
		log := pod.log(1)
		GinkgoWriter.Printf("the restarted plugin's log:\n%s\n", log)
		Expect(log).To(ContainSubstring("an earlier run left a record under %s: restoring first", workRoot))
		Expect(log).To(ContainSubstring("restored; removed"))
		expectSameVerdicts(got, hostRun)
		Expect(pod.stopPlugin(ctx, again)).To(BeEquivalentTo(externalCode))
		checkNodeAsItWas(ctx)
	}, SpecTimeout(suiteRunTimeout+4*time.Minute))
})
