package cni_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// sustainedHangDeadline is the client deadline of each attempt while ADD
// hangs, from the moment it hangs: shorter than hangDeadline, since every
// attempt waits it out (an attempt the runtime holds before ADD waits
// scn.HangReach).
var sustainedHangDeadline = scn.PastHang(cniconf.VerbAdd, 1500*time.Millisecond)

// sustainedSettleWindow is how long what the runtime still cleans up after
// an abandoned attempt gets to go before the next attempt counts it:
// kubelet's backOffPeriod (pkg/kubelet/kubelet.go, 10 s; report's
// KubeletRetryModel), when its pod worker's next attempt comes — a contract
// value. Its inventories count rounds too (inventoryUntil: at least
// scn.MinRounds however long each takes).
const sustainedSettleWindow = 10 * time.Second

// sustainedCase is how each attempt of a sustained scenario fails.
type sustainedCase struct {
	deadline scn.Deadline
	// settle, where set, is how long what the runtime still cleans up after
	// an attempt its client gave up on may take to go.
	settle time.Duration
}

// The fault does not clear, and kubelet retries the pod every 10–15 s
// for as long as it exists: each retry a sandbox at the attempt kubelet
// gives it (one past the newest the runtime lists, or 0 again where it
// lists none), the failed one stopped and removed. A leak that one failure
// leaves is a nuisance; one that grows with every retry drains the node —
// a /24 in under an hour at one address per retry.
var _ = Describe("A pod retried as kubelet retries it", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	When("a later plugin fails ADD and DEL on every attempt", KubeletScenario("sustained-partial-add-del-fails", kubeletCase{
		family: kubeletRetries, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error"))
		},
	}), Label("fault:sustained"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: error, DEL: error, always)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().
				On(cniconf.VerbAdd, cniconf.Fail(7, "cnifault: injected ADD error after bridge")).
				On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error")))
		}, NodeTimeout(scenarioSetupTimeout))
		itDoesNotLeakMorePerAttempt(current, sustainedCase{deadline: scn.Within(criCallTimeout)})
	})

	When("ADD hangs past the client's deadline on every attempt", KubeletScenario("sustained-add-hang", kubeletCase{
		family: kubeletRetries, hang: true, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbAdd, cniconf.Hang()) },
	}), Label("fault:sustained", "fault:hang"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: hang, always)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().On(cniconf.VerbAdd, cniconf.Hang()))
		}, NodeTimeout(scenarioSetupTimeout))
		itDoesNotLeakMorePerAttempt(current, sustainedCase{deadline: sustainedHangDeadline, settle: sustainedSettleWindow})
	})
})

// stuckSyncs is how many of kubelet's syncs fail to kill the pod before it
// counts as stuck: its Stop fails every time while the fault persists.
const stuckSyncs = 3

// itDoesNotLeakMorePerAttempt retries the scenario's pod tc.SustainedAttempts
// times under the fault, as kubelet does: after each attempt its next sync
// kills the pod's sandbox, and only once that succeeded does it make the
// next attempt (kuberuntime_manager.go SyncPod at v1.34: a failed
// killPodWithSyncResult returns before createPodSandbox), its GC removing
// the dead sandbox. It counts what is left after each attempt: no kind may
// grow with the attempts, and a pod whose Stop keeps failing is stuck — it
// never starts.
func itDoesNotLeakMorePerAttempt(current func() *scenario, su sustainedCase) {
	It("is retried by kubelet and leaves no more after each attempt than after the first", func(ctx SpecContext) {
		sc := current()
		var per []report.AttemptLeaks
		var first map[string]int
		// killed counts the attempts whose failed sandbox was listed and
		// killed: kubelet's PLEG sees each come and go and syncs the pod at
		// once (verdict.RetriedAtOnce), unless the attempt itself hung
		// until its deadline, which then sets the pace.
		killed := 0
		// next is the attempt of kubelet's next sandbox for the pod: 0
		// until the runtime lists one of its sandboxes (sc.NextAttempt).
		var next uint32
		for attempt := range tc.SustainedAttempts {
			By(fmt.Sprintf("attempt %d: running the pod, then killing its failed sandbox as kubelet's next sync does", attempt+1))
			errs := sc.RunPodsAtOnceE(ctx, su.deadline, next, []int{0})
			if attempt == 0 {
				sc.ExpectFaultFired(ctx, faultFiredTimeout)
			}
			contract.Expect(errs[0]).To(HaveOccurred(), "RunPodSandbox succeeded despite the fault (attempt %d)", attempt+1)
			stuck := sc.kubeletKillsPod(ctx)
			if stuck == nil && sc.ReclaimSandboxes > 0 {
				killed++
			}
			if stuck == nil {
				// Killed: kubelet's GC removes the dead sandbox.
				if err := sc.StopAndRemoveLeftovers(ctx); err != nil {
					GinkgoWriter.Printf("kubelet's GC: %v\n", err)
				}
				next = sc.NextAttempt
			}
			// After the first attempt, what the runtime still cleans up
			// gets its window to go down to the first attempt's level.
			counts := sc.settledCounts(ctx, su.settle, first)
			if attempt == 0 {
				first = counts
			}
			per = append(per, report.AttemptLeaks{Attempt: attempt + 1, Leaks: counts})
			GinkgoWriter.Printf("after attempt %d: %v\n", attempt+1, counts)
			if stuck != nil {
				s := verdict.Sustained(per, sc.Network.Subnet)
				s.Stuck = stuck
				sc.Sustained = &s
				contract.Expect(sustainedReport{sc.ID, s}).To(NotGrowWithAttempts())
				return
			}
		}
		s := verdict.Sustained(per, sc.Network.Subnet)
		if su.settle == 0 && killed == len(per) {
			verdict.RetriedAtOnce(&s)
		}
		sc.Sustained = &s
		contract.Expect(sustainedReport{sc.ID, s}).To(NotGrowWithAttempts())
	}, SpecTimeout(scenarioTimeout))
}

// kubeletKillsPod is kubelet's kill of the pod on its next syncs
// (killPodWithSyncResult: StopPodSandbox of every sandbox of the pod): nil
// once a kill succeeded, or the pod stuck after stuckSyncs failed ones.
func (sc *scenario) kubeletKillsPod(ctx SpecContext) *report.Stuck {
	var err error
	for range stuckSyncs {
		if err = sc.StopLeftovers(ctx); err == nil {
			return nil
		}
		GinkgoWriter.Printf("kubelet's kill of the pod: %v\n", err)
	}
	return &report.Stuck{FailedStops: stuckSyncs, Error: err.Error()}
}
