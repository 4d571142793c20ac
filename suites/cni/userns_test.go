package cni_test

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// usernsLabels are the catalog labels of every user-namespaced scenario
// beside its family's.
func usernsLabels(more ...string) Labels {
	return Label(append(more, scn.ShapeUserNS, report.NeedsLabel(report.NeedUserNS))...)
}

// usernsProbes is, per runtime endpoint, why it cannot run a user-
// namespaced pod ("" where it can): the first user-namespaced scenario of
// a process probes it, the rest of the process reads the answer.
var usernsProbes = struct {
	sync.Mutex
	why map[string]*string
}{why: map[string]*string{}}

// usernsProbePod numbers the probe's pod among the scenario's.
const usernsProbePod = 90

// useUserNS makes the scenario's pods user-namespaced (hostUsers: false)
// and skips it where the runtime cannot run such a pod, with what shows
// it: the probe, a pod of the same shape on a healthy network, was
// refused (the runtime, runc or the kernel cannot: idmapped mounts, a CRI
// without user namespaces), or started in the host's user namespace (a
// runtime that ignores userns_options runs it there, and every verdict of
// the scenario would be a plain pod's). A probe that starts is stopped and
// removed before the scenario's own install.
func (sc *scenario) useUserNS(ctx SpecContext) {
	GinkgoHelper()
	sc.UseUserNS()
	usernsProbes.Lock()
	defer usernsProbes.Unlock()
	why, probed := usernsProbes.why[rt.Endpoint()]
	if !probed {
		By("probing the runtime with a user-namespaced pod on a healthy network")
		sc.InstallNetwork(ctx, sc.chain())
		// Only an answer is kept: a probe that met the harness's error
		// (a node that starts no pod) fails every scenario that asks.
		w := sc.probeUserNS(ctx)
		why = &w
		usernsProbes.why[rt.Endpoint()] = why
	}
	if *why != "" {
		skipLacking(report.NeedUserNS, *why)
	}
}

// probeUserNS starts the probe pod, reads its pause's uid_map, and removes
// it; it returns why the runtime cannot run a user-namespaced pod, or "".
func (sc *scenario) probeUserNS(ctx SpecContext) string {
	GinkgoHelper()
	want := sc.Shape.UserNS
	cctx, cancel := context.WithTimeout(ctx, criCallTimeout)
	defer cancel()
	id, err := rt.CRI().RunPodSandbox(cctx, sc.PodConfigOf(usernsProbePod, 0))
	if err != nil {
		// Refused for its user namespace only where a plain pod starts:
		// a node that starts no pod at all (its sandbox image gone) is the
		// harness's error, never a runtime without user namespaces.
		plain := sc.Names.PodConfigOf(rt.CgroupParent(), usernsProbePod+1, 0)
		pid, perr := rt.CRI().RunPodSandbox(cctx, plain)
		Expect(perr).NotTo(HaveOccurred(), "the pod did not start on a healthy network (a user-namespaced probe was refused too: %v)", err)
		sc.Scope.MarkOwn(pid)
		Expect(rt.CRI().StopPodSandbox(ctx, pid)).To(Succeed(), "stopping the plain probe pod")
		Expect(rt.CRI().RemovePodSandbox(ctx, pid)).To(Succeed(), "removing the plain probe pod")
		return fmt.Sprintf("the runtime refused a user-namespaced pod (uids and gids 0-65535 on %d) on a healthy network, where a plain pod started: %v", want.GetHostId(), err)
	}
	sc.Scope.MarkOwn(id)
	defer func() {
		Expect(rt.CRI().StopPodSandbox(ctx, id)).To(Succeed(), "stopping the user namespace probe pod")
		Expect(rt.CRI().RemovePodSandbox(ctx, id)).To(Succeed(), "removing the user namespace probe pod")
	}()
	pid, err := sc.SandboxPID(ctx, id)
	Expect(err).NotTo(HaveOccurred(), "the user namespace probe pod's pid")
	m, err := scn.UIDMapOf(pid)
	Expect(err).NotTo(HaveOccurred(), "the user namespace probe pod's uid_map")
	switch {
	case m.Host():
		return fmt.Sprintf("the runtime ran a user-namespaced pod in the host's user namespace (pause pid %d uid_map %q): it does not apply CRI userns_options", pid, m)
	case !m.Is(want):
		Fail(fmt.Sprintf("the user namespace probe pod's pause (pid %d) has uid_map %q, not the mapping asked for (%d %d %d)",
			pid, m, want.GetContainerId(), want.GetHostId(), want.GetLength()))
	}
	GinkgoWriter.Printf("the runtime runs user-namespaced pods: probe pause pid %d uid_map %q\n", pid, m)
	return ""
}

// The RunPodSandbox fault families for a pod with a user namespace of its
// own (hostUsers: false): the runtime makes the pod's network namespace
// differently for it (containerd 2.x creates it inside the pod's user
// namespace, internal/cri/server/sandbox_run.go setupNetnsWithinUserns;
// CRI-O pins it with pinns under the pod's mappings), and what it made
// must go when the call fails as it goes for a plain pod.
var _ = Describe("RunPodSandbox for a user-namespaced pod", func() {
	var sc *scenario
	current := func() *scenario { return sc }
	begin := func(ctx SpecContext) {
		sc = newScenario(ctx)
		sc.useUserNS(ctx)
	}

	When("the CNI config dir is empty", KubeletTwin("userns-no-cni-config", "no-cni-config"), usernsLabels("fault:config"), func() {
		BeforeEach(func(ctx SpecContext) {
			begin(ctx)
			By("emptying the CNI config dir until the runtime has no usable network")
			sc.InstallNoNetwork(ctx)
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothingWithin(current, mayBlockDeadline)
	})

	When("the first plugin returns a CNI error on ADD", KubeletTwin("userns-add-error", "add-error"), usernsLabels("fault:add"), func() {
		BeforeEach(func(ctx SpecContext) {
			begin(ctx)
			By("installing cni-fault (ADD: error 7) before bridge")
			sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name,
				sc.Fault().On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error")), sc.Network.BridgePlugin()))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("a plugin dies by a signal during ADD after bridge allocated", KubeletTwin("userns-add-crash", "add-crash"), usernsLabels("fault:add"), func() {
		BeforeEach(func(ctx SpecContext) {
			begin(ctx)
			By("installing bridge, then cni-fault (ADD: SIGKILL itself)")
			sc.InstallNetwork(ctx, sc.chain(sc.Fault().On(cniconf.VerbAdd, cniconf.Crash("SIGKILL"))))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("ADD hangs past the client's deadline", KubeletTwin("userns-add-hang-deadline", "add-hang-deadline"), usernsLabels("fault:hang"), func() {
		BeforeEach(func(ctx SpecContext) {
			begin(ctx)
			By("installing bridge, then cni-fault (ADD: hang once, then pass)")
			sc.InstallHangingAdd(ctx)
		}, NodeTimeout(scenarioSetupTimeout))
		itLeavesNothingPastTheHang(current)
	})

	When("a later plugin fails ADD and its DEL fails too", KubeletTwin("userns-partial-add-del-fails", "partial-add-del-fails"), usernsLabels("fault:partial"), func() {
		BeforeEach(func(ctx SpecContext) {
			begin(ctx)
			By("installing bridge, then cni-fault (ADD: error, DEL: error)")
			sc.InstallNetwork(ctx, sc.chain(sc.Fault().
				On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error"))))
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	When("the runtime is killed while ADD is in progress", KubeletTwin("userns-runtime-killed-mid-add", "runtime-killed-mid-add"),
		usernsLabels("fault:crash", report.LabelManagedOnly, "kubelet:runtime-restart"), func() {
			var ctl runtimes.Controllable
			BeforeEach(func(ctx SpecContext) {
				ctl = controllable()
				begin(ctx)
				By("installing bridge, then cni-fault (ADD: hang once, then pass)")
				sc.InstallHangingAdd(ctx)
			}, NodeTimeout(scenarioSetupTimeout))
			itLeavesNothingOnceRestarted(current, func() runtimes.Controllable { return ctl })
		})

	When("an NRI plugin rejects the pod after its network is up", KubeletTwin("userns-nri-rejects-run", "nri-rejects-run"),
		usernsLabels("fault:nri", report.LabelManagedOnly, report.NeedsLabel(report.NeedNRI)), func() {
			BeforeEach(func(ctx SpecContext) {
				begin(ctx)
				sc.requireNRI(ctx)
				By("installing bridge, observed by cni-fault, and an NRI fault (RunPodSandbox: reject)")
				sc.InstallNetwork(ctx, sc.chain(sc.Fault()))
				Expect(sc.SetNRIFault(cniconf.NRIRunPodSandbox, cniconf.Fail(0, "cnifault: injected NRI RunPodSandbox rejection"))).To(Succeed())
			}, NodeTimeout(scenarioSetupTimeout))
			itFailsAndLeavesNothing(current)
		})
})

// A user-namespaced pod lives through a runtime restart (an upgrade, an OOM
// kill): its sandbox, its network and its mappings must survive, a
// container created in it after the restart must get the pod's mappings
// (CRI-O lost them until PR 10014: its restored sandboxes carried no ID
// mappings, and a container made after the restart ran with the wrong
// ones), and the pod must then go as any pod does.
var _ = Describe("A user-namespaced pod", func() {
	var (
		sc        *scenario
		ctl       runtimes.Controllable
		restarted bool
	)

	When("the runtime is killed and restarted under it", KubeletScenario("userns-runtime-restart", kubeletCase{family: kubeletAcrossRestart}),
		usernsLabels("fault:restart", report.LabelManagedOnly, "kubelet:pod-across-restart"), func() {
			BeforeEach(func(ctx SpecContext) {
				ctl = controllable()
				sc = newScenario(ctx)
				sc.useUserNS(ctx)
				restarted = false
				By("installing the pod's network: bridge, observed by cni-fault")
				sc.InstallNetwork(ctx, sc.chain(sc.Fault()))
				sc.ExpectFault("the runtime to be killed by its PID and started again under the pod", func(context.Context) (string, bool) {
					return "runtime killed by its PID and restarted", restarted
				})
			}, NodeTimeout(scenarioSetupTimeout))

			It("keeps the pod, its network and its mappings, maps a new container alike, and leaves nothing once removed", func(ctx SpecContext) {
				want := sc.Shape.UserNS
				By("starting a user-namespaced pod on the healthy network, and a container in it")
				id, err := sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
				Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")
				before := sc.podState(ctx, id)
				Expect(before.uidMap.Is(want)).To(BeTrue(), "the pod's pause (pid %d) has uid_map %q before the restart", before.pid, before.uidMap)
				first, firstMap, err := sc.startUserNSContainer(ctx, id, "before-restart")
				Expect(err).NotTo(HaveOccurred(), "a container did not start in the pod before the restart")
				contract.Expect(firstMap.Is(want)).To(BeTrue(), "container %s has uid_map %q before the restart, not the pod's", first, firstMap)

				By("killing the runtime by its PID and starting it again")
				Expect(ctl.Crash(ctx)).To(Succeed())
				Expect(ctl.Restart(ctx)).To(Succeed())
				restarted = true
				sc.ExpectFaultFired(ctx, faultFiredTimeout)

				By("reading the pod's state as the restarted runtime reports it, and starting another container in it")
				after := sc.podState(ctx, id)
				second, secondMap, secondErr := sc.startUserNSContainer(ctx, id, "after-restart")

				sc.PodAcrossRestart = acrossRestart(before, after, secondErr, secondMap, want)

				By("stopping and removing the pod, as kubelet does")
				stopErr := rt.CRI().StopPodSandbox(ctx, id)
				removeErr := rt.CRI().RemovePodSandbox(ctx, id)
				leaks := sc.Leaks(ctx)

				contract.Expect(after.err).NotTo(HaveOccurred(), "the restarted runtime lost the pod")
				contract.Expect(after.state).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY), "the pod is not ready after the restart")
				contract.Expect(after.ip).To(Equal(before.ip), "the pod's address changed across the restart")
				contract.Expect(after.pid).To(Equal(before.pid), "the pod's pause process changed across the restart")
				contract.Expect(after.uidMap.Is(want)).To(BeTrue(), "the pod's pause has uid_map %q after the restart", after.uidMap)
				contract.Expect(secondErr).NotTo(HaveOccurred(), "a container created in the pod after the restart (as %s was before it) did not start", first)
				contract.Expect(secondMap.Is(want)).To(BeTrue(), "container %s, created in the pod after the restart, has uid_map %q, not the pod's (%d %d %d)",
					second, secondMap, want.GetContainerId(), want.GetHostId(), want.GetLength())
				contract.Expect(stopErr).NotTo(HaveOccurred(), "StopPodSandbox after the restart")
				contract.Expect(removeErr).NotTo(HaveOccurred(), "RemovePodSandbox after the restart")
				contract.Expect(leaks).To(BeClean())
			}, SpecTimeout(scenarioTimeout+runtimeRecoverTimeout))
		})
})

// acrossRestart classifies what the restarted runtime made of the pod
// (report.Scenario.PodAcrossRestart), as kubelet would meet it: lost, no
// address, or kept, its next container mapped as the pod or not.
func acrossRestart(before, after podState, containerErr error, containerMap scn.IDMap, want *runtimeapi.IDMapping) string {
	switch {
	case after.err != nil || after.state != runtimeapi.PodSandboxState_SANDBOX_READY:
		return report.PodAcrossLost
	case after.ip == "" && before.ip != "":
		return report.PodAcrossAddressLost
	case containerErr != nil:
		return report.PodAcrossContainerFailed
	case !containerMap.Is(want):
		return report.PodAcrossContainerUnmapped
	}
	return report.PodAcrossKept
}

// podState is what the runtime and the kernel say of a live pod.
type podState struct {
	err    error
	state  runtimeapi.PodSandboxState
	ip     string
	pid    int
	uidMap scn.IDMap
}

// podState reads a pod's state, address, pause pid and uid_map; the
// runtime's error, where it has lost the pod, is the state's. A pod the
// runtime reports not ready has no pause to read: its runtime lost it
// (acrossRestart), and its pid and uid_map stay empty. containerd 1.7 once
// reported a pod so after the restart in a loaded make test, its task gone
// ("processStatus":"deleted", pid 0), and reading the pid made that an
// error of the harness's instead of the lost pod it was.
func (sc *scenario) podState(ctx SpecContext, id string) podState {
	GinkgoHelper()
	resp, err := rt.CRI().Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return podState{err: err}
	}
	s := podState{state: resp.GetStatus().GetState(), ip: resp.GetStatus().GetNetwork().GetIp()}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return s
	}
	s.pid, err = sc.SandboxPID(ctx, id)
	Expect(err).NotTo(HaveOccurred(), "the pod's pause pid")
	s.uidMap, err = scn.UIDMapOf(s.pid)
	Expect(err).NotTo(HaveOccurred(), "the pod's pause's uid_map")
	return s
}

// containerStartTimeout bounds a container's create and start: each a CRI
// call within kubelet's deadline.
const containerStartTimeout = 2 * criCallTimeout

// startUserNSContainer creates and starts a container named name in the
// pod, as kubelet does for a hostUsers: false pod (the container's
// namespace options carry the pod's user namespace), running pause from
// the harness's image, and returns its id and its process's uid_map. The
// container goes with the pod.
func (sc *scenario) startUserNSContainer(ctx SpecContext, pod, name string) (string, scn.IDMap, error) {
	GinkgoHelper()
	cctx, cancel := context.WithTimeout(ctx, containerStartTimeout)
	defer cancel()
	imp, ok := rt.(runtimes.SandboxImageImporter)
	Expect(ok).To(BeTrue(), "a managed runtime has the harness's image imported")
	ref := imp.ImportedImage()
	cfg := sc.PodConfig()
	created, err := rt.CRI().Runtime.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: pod,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			// The name the pod spec gave, as kubelet sends it: CRI-O
			// verifies an image's signature policy by it.
			Image:   &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: ref},
			Command: []string{"/pause"},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(),
			}},
		},
		SandboxConfig: cfg,
	})
	if err != nil {
		return "", "", fmt.Errorf("CreateContainer: %w", err)
	}
	ctr := created.GetContainerId()
	if _, err := rt.CRI().Runtime.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: ctr}); err != nil {
		return ctr, "", fmt.Errorf("StartContainer: %w", err)
	}
	pid, err := sc.ContainerPID(cctx, ctr)
	if err != nil {
		return ctr, "", err
	}
	m, err := scn.UIDMapOf(pid)
	return ctr, m, err
}
