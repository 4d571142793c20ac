package selfvalidation_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// kubeletTunables are the kernel tunables kubelet sets at its start
// (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables): a
// kubelet run must put the node's values back.
var kubeletTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func readTunables() map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	for _, t := range kubeletTunables {
		b, err := os.ReadFile(filepath.Join("/proc/sys", t))
		Expect(err).NotTo(HaveOccurred())
		out[t] = strings.TrimSpace(string(b))
	}
	return out
}

// Kubelet mode on containerd 2.4 (make test's one runtime; make
// kubelet-check runs the others): every covered scenario's fault under the
// pinned real kubelet, each pinned to what kubelet made of its pod and
// judged to agree with the plain run's model. The outcomes are kubelet's
// on containerd v2.4.2: a failed RunPodSandbox takes its sandbox and netns
// with it, so the deleted pod goes at once, where DEL failed its address
// stranded (issue 12130); a retried pod strands one address per attempt,
// kubelet retrying after its 10–15 s backoff; a pod whose DEL fails stays
// Terminating until the fault clears, and one whose DEL fails once goes
// at kubelet's next Stop.
var _ = Describe("Kubelet mode", Label("kubelet"), func() {
	It("gives every covered scenario a real kubelet's run that agrees with the model", func(ctx SpecContext) {
		before := takeNodeState()
		tunables := readTunables()
		// Twelve processes: a kubelet run mostly waits on kubelet (its
		// retries, its GC, a teardown's minute with the fault in place, a
		// hung call's deadline), and in four the 23 scenarios first covered
		// took 5m42s on an idle node.
		r := runGated(ctx, "kubelet-mode", "--kubelet", "--procs", "12",
			"--known-failures", filepath.Join(repoRoot, "hack", "known-failures.yaml"))
		Expect(r.ExitCode).To(Equal(report.ExitPass), r.Output)

		var covered []string
		for _, s := range r.Report.Scenarios {
			if s.Has(report.LabelKubeletMode) {
				covered = append(covered, s.ID)
			}
		}
		Expect(covered).To(ConsistOf("add-error", "add-exit-no-output", "add-garbage-result", "add-crash", "partial-add", "partial-add-del-fails", "partial-add-del-fails-once",
			"sustained-partial-add-del-fails", "storm-partial-add-del-fails", "storm-no-cni-config", "teardown-del-error", "teardown-del-error-once", "teardown-no-cni-config",
			"teardown-missing-plugin-binary", "teardown-runtime-restart", "nri-rejects-stop", "cni-cache-lost", "cni-cache-corrupt", "no-cni-config", "malformed-cni-config", "missing-plugin-binary", "ipam-exhausted", "late-cni-config",
			"add-hang-deadline", "sustained-add-hang", "storm-add-hang", "teardown-del-hang", "node-reboot",
			"nri-rejects-run", "sandbox-image-missing", "runtime-killed-mid-add"))

		outcomes := map[string]string{}
		for _, id := range covered {
			k := r.Report.Scenario(id).KubeletRun
			Expect(k).NotTo(BeNil(), "%s has no kubelet run", id)
			Expect(k.Error).To(BeEmpty(), "%s: kubelet run not judged", id)
			if k.Outcome == report.KubeletNeverAttempted {
				Expect(k.Model).To(Equal(verdict.NotComparedNeverAttempted), id)
			} else {
				Expect(k.Agrees).NotTo(BeNil(), id)
				Expect(*k.Agrees).To(BeTrue(), "%s: %s", id, k.Disagreement)
			}
			outcomes[id] = k.WhileFaulted + "/" + k.Outcome
		}
		Expect(outcomes).To(Equal(map[string]string{
			"add-error":                       "/" + report.KubeletRemoved,
			"add-exit-no-output":              "/" + report.KubeletRemoved,
			"add-garbage-result":              "/" + report.KubeletRemoved,
			"add-crash":                       "/" + report.KubeletRemoved,
			"partial-add":                     "/" + report.KubeletRemoved,
			"partial-add-del-fails":           "/" + report.KubeletRemoved,
			"partial-add-del-fails-once":      "/" + report.KubeletRemoved,
			"sustained-partial-add-del-fails": "/" + report.KubeletRemoved,
			"storm-partial-add-del-fails":     "/" + report.KubeletRemoved,
			"teardown-del-error":              report.KubeletStuckTerminating + "/" + report.KubeletRemoved,
			"teardown-del-error-once":         report.KubeletRemoved + "/" + report.KubeletRemoved,
			"teardown-no-cni-config":          report.KubeletStuckTerminating + "/" + report.KubeletRemoved,
			"teardown-missing-plugin-binary":  report.KubeletStuckTerminating + "/" + report.KubeletRemoved,
			"teardown-runtime-restart":        report.KubeletStuckTerminating + "/" + report.KubeletRemoved,
			// libcni 1.2 runs DEL without a cache entry it cannot read.
			"cni-cache-lost":    report.KubeletRemoved + "/" + report.KubeletRemoved,
			"cni-cache-corrupt": report.KubeletRemoved + "/" + report.KubeletRemoved,
			// containerd only logs NRI's Stop error: kubelet's Stop goes through.
			"nri-rejects-stop": report.KubeletRemoved + "/" + report.KubeletRemoved,
			// containerd says NetworkReady=false with no config, and
			// kubelet starts no pod until it says true.
			"no-cni-config":        "/" + report.KubeletNeverAttempted,
			"malformed-cni-config": "/" + report.KubeletNeverAttempted,
			// A list naming a missing plugin loads: the pod's one
			// RunPodSandbox fails on it, an address stranded.
			"missing-plugin-binary": "/" + report.KubeletRemoved,
			"ipam-exhausted":        "/" + report.KubeletRemoved,
			// Nor before the config appears; then the pod starts.
			"late-cni-config":     "/" + report.KubeletRemoved,
			"storm-no-cni-config": "/" + report.KubeletRemoved,
			// A hung ADD ends at kubelet's deadline, containerd's cleanup
			// with it: the pod goes, nothing left; once it passes every
			// storm pod starts.
			"add-hang-deadline":  "/" + report.KubeletRemoved,
			"sustained-add-hang": "/" + report.KubeletRemoved,
			"storm-add-hang":     "/" + report.KubeletRemoved,
			// Each Stop's DEL hangs to kubelet's deadline until the agent
			// comes back.
			"teardown-del-hang": report.KubeletStuckTerminating + "/" + report.KubeletRemoved,
			// Kubelet, back after the reboot, stops and removes the old
			// sandboxes and starts its pods again.
			"node-reboot": "/" + report.KubeletRemoved,
			// The failed RunPodSandbox beside the network takes what it
			// made with it; after the runtime's kill mid-ADD the restarted
			// containerd lists the dead sandbox, and kubelet's Stop and
			// Remove take it.
			"nri-rejects-run":        "/" + report.KubeletRemoved,
			"sandbox-image-missing":  "/" + report.KubeletRemoved,
			"runtime-killed-mid-add": "/" + report.KubeletRemoved,
		}))
		for _, id := range []string{"add-hang-deadline", "sustained-add-hang", "storm-add-hang", "teardown-del-hang"} {
			Expect(r.Report.Scenario(id).KubeletRun.RequestTimeoutSeconds).To(BeNumerically(">", 0),
				"%s: the hung calls end at a kubelet's shortened runtime-request-timeout", id)
		}
		hung := r.Report.Scenario("sustained-add-hang").KubeletRun
		Expect(hung.Attempts).To(BeNumerically(">=", 2), "kubelet retried the pod whose ADD hangs")
		reboot := r.Report.Scenario("node-reboot").KubeletRun
		Expect(reboot.Started).To(Equal(reboot.Pods), "every pod ran again after the reboot: %s", reboot.Why)
		sustained := r.Report.Scenario("sustained-partial-add-del-fails").KubeletRun
		Expect(sustained.Attempts).To(BeNumerically(">=", 2), "kubelet retried the pod")
		Expect(report.CountKinds(sustained.Leaks)[report.AddressKind]).To(Equal(sustained.Attempts),
			"one address stranded per RunPodSandbox attempt")
		Expect(sustained.IdleSeconds).To(BeNumerically(">=", report.KubeletBackOff.Seconds()),
			"a failed attempt leaves no sandbox on 2.4: kubelet leaves the pod alone for its backoff before each retry")

		expectNoResidue(ctx, before, "after kubelet mode")
		Expect(readTunables()).To(Equal(tunables), "the kernel tunables kubelet sets are the node's again")
	}, SpecTimeout(suiteRunTimeout))
})
