package cni_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// Kubelet's teardown, compressed in time: it retries StopPodSandbox, then
// RemovePodSandbox, on every sync; the harness gives it teardownWindow and
// at least teardownMinRounds syncs, once while the fault persists and once
// after it cleared. Each call has
// kubelet's own client deadline (criCallTimeout): a Stop that a loaded
// machine makes slow is still the runtime's answer, and a round still in
// flight when the window ends finishes before it is judged. Only where DEL
// hangs is the deadline the point, and it runs from the hang.
const (
	teardownWindow   = 2 * time.Second
	teardownInterval = 250 * time.Millisecond
	// teardownHangWindow lets two Stops run into their deadline while DEL
	// hangs.
	teardownHangWindow = 2 * teardownHangAfter
	// teardownHangAfter is how long a Stop waits on a hung DEL before its
	// client gives up.
	teardownHangAfter = 2 * time.Second
)

// teardownHangDeadline is a Stop's or Remove's client deadline while DEL
// hangs: kubelet's deadline running out on the hung DEL, counted from the
// moment it hangs.
var teardownHangDeadline = scn.PastHang(cniconf.VerbDel, teardownHangAfter)

// teardownCase is how a scenario breaks a live pod's network and how the
// fault clears.
type teardownCase struct {
	inject func(ctx SpecContext)
	// restart, where set, runs between a Stop that failed while the fault
	// persists and the next one (the runtime restarts).
	restart func(ctx SpecContext)
	// clear, where set, ends the fault; nil where nothing does (a broken
	// cache entry stays broken: label persists), and the pod must go with
	// it in place.
	clear func(ctx SpecContext)
	// window is each round of kubelet's teardown; teardownWindow if zero.
	window time.Duration
	// deadline is each Stop's and Remove's; kubelet's (criCallTimeout) if
	// zero.
	deadline scn.Deadline
}

// A pod starts on a healthy network; then its network breaks, and kubelet
// tears it down (pods stuck Terminating while the network agent is down or
// upgrading). A runtime may refuse to stop while the fault persists, but
// once it clears, kubelet's retries must finish the job and leave nothing;
// one that removes the pod while the fault persists must leave nothing
// either — removing it and stranding its address is what drains a pool.
var _ = Describe("A live pod's teardown", func() {
	var (
		sc *scenario
		// chain is the pod's healthy network; a scenario may add to it.
		chain func() cniconf.NetworkList
	)
	current := func() *scenario { return sc }
	// Faults change in cni-fault's faults file, not in the conf dir: CRI-O
	// tears down with the config cached at ADD (ocicni forEachNetwork with
	// fromCache), so a rewritten list would never reach its DEL.
	setFaults := func(f cniconf.Fault) {
		Expect(sc.SetFaults(f.Faults)).To(Succeed())
		sc.ExpectJournal(f, cniconf.VerbDel)
	}
	healthy := func(ctx SpecContext) {
		Expect(sc.SetFaults(nil)).To(Succeed())
	}
	delFails := cniconf.Fail(7, "cnifault: injected DEL error")

	// Every teardown scenario starts alike: a pod's healthy network, whose
	// cni-fault only journals until the scenario breaks it.
	BeforeEach(func(ctx SpecContext) {
		sc = newScenario(ctx)
		chain = func() cniconf.NetworkList {
			return cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault())
		}
	}, NodeTimeout(scenarioSetupTimeout))
	JustBeforeEach(func(ctx SpecContext) {
		By("installing the pod's network (every verb passes)")
		sc.InstallNetwork(ctx, chain())
	}, NodeTimeout(scenarioSetupTimeout))

	When("DEL fails after the pod started", KubeletScenario("teardown-del-error", kubeletCase{
		family: kubeletTeardown, verb: cniconf.VerbDel,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbDel, delFails) },
	}), Label("fault:teardown"), func() {
		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) { setFaults(sc.Fault().On(cniconf.VerbDel, delFails)) },
			clear:  healthy,
		})
	})

	When("DEL fails once after the pod started", KubeletScenario("teardown-del-error-once", kubeletCase{
		family: kubeletTeardown, verb: cniconf.VerbDel,
		faults: func(k *scenario) cniconf.Fault {
			return k.Fault().On(cniconf.VerbDel, delFails.Times(1), cniconf.Pass())
		},
	}), Label("fault:teardown", "once"), func() {
		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) { setFaults(sc.Fault().On(cniconf.VerbDel, delFails.Times(1), cniconf.Pass())) },
			clear:  healthy,
		})
	})

	// The network agent hangs: every DEL blocks until the client's deadline
	// ends the call; the fault clears when the agent comes back, and the
	// DELs it left hanging end with it.
	When("DEL hangs past the client's deadline after the pod started", KubeletScenario("teardown-del-hang", kubeletCase{
		family: kubeletTeardown, hang: true, verb: cniconf.VerbDel,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbDel, cniconf.Hang()) },
	}), Label("fault:teardown", "fault:hang"), func() {
		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) { setFaults(sc.Fault().On(cniconf.VerbDel, cniconf.Hang())) },
			clear: func(ctx SpecContext) {
				healthy(ctx)
				sc.stopHungPlugins()
			},
			window:   teardownHangWindow,
			deadline: teardownHangDeadline,
		})
	})

	// The failure beside the network: an NRI plugin refuses the pod's Stop
	// and Remove until it is fixed (a policy plugin down or misconfigured).
	When("an NRI plugin rejects the pod's Stop and Remove after it started", KubeletScenario("nri-rejects-stop", kubeletCase{
		family: kubeletTeardown,
		breaks: func(_ SpecContext, k *scenario) error {
			reject := cniconf.Fail(0, "cnifault: injected NRI rejection")
			return k.SetNRIFaults(map[cniconf.Verb][]cniconf.Step{
				cniconf.NRIStopPodSandbox: {reject}, cniconf.NRIRemovePodSandbox: {reject},
			}, cniconf.NRIStopPodSandbox)
		},
		clears: func(_ SpecContext, k *scenario) error { return k.ClearNRIFault() },
	}),
		Label("fault:teardown", "fault:nri", report.LabelManagedOnly, report.NeedsLabel(report.NeedNRI)), func() {
			BeforeEach(func(ctx SpecContext) { sc.requireNRI(ctx) }, NodeTimeout(scenarioSetupTimeout))
			reject := cniconf.Fail(0, "cnifault: injected NRI rejection")
			itTearsDownAndLeavesNothing(current, teardownCase{
				inject: func(ctx SpecContext) {
					Expect(sc.SetNRIFaults(map[cniconf.Verb][]cniconf.Step{
						cniconf.NRIStopPodSandbox: {reject}, cniconf.NRIRemovePodSandbox: {reject},
					}, cniconf.NRIStopPodSandbox)).To(Succeed())
				},
				clear: func(ctx SpecContext) { Expect(sc.ClearNRIFault()).To(Succeed()) },
			})
		})

	When("the CNI config dir is emptied after the pod started", KubeletScenario("teardown-no-cni-config", kubeletCase{
		family: kubeletTeardown,
		breaks: breakByEmptyConfDir,
		clears: func(ctx SpecContext, k *scenario) error {
			return k.installListQuietly(ctx, cniconf.NewList(k.Network.Name, k.Network.BridgePlugin(), k.Fault()))
		},
	}), Label("fault:teardown"), func() {
		itTearsDownAndLeavesNothing(current, teardownCase{
			// The fault is the state a live pod's teardown meets: a runtime
			// that tears down with the config cached at ADD (CRI-O) never
			// reads the emptied dir, and its Stop says nothing of it.
			inject: func(ctx SpecContext) {
				sc.InstallNoNetwork(ctx)
				sc.ExpectNoNetwork()
			},
			clear: func(ctx SpecContext) { sc.InstallNetwork(ctx, chain()) },
		})
	})

	// A CNI DaemonSet upgrade removed a binary the live pod's chain names:
	// DEL fails on it, before the plugins that hold the pod's address. The
	// binary is the scenario's own, in a bin dir the harness owns.
	When("a plugin binary of the pod's chain is removed after it started", KubeletScenario("teardown-missing-plugin-binary", kubeletCase{
		family: kubeletTeardown,
		chain: func(k *scenario) (cniconf.NetworkList, error) {
			return cniconf.NewList(k.Network.Name, k.Network.BridgePlugin(),
				cniconf.Opaque{Type: k.VanishingPlugin()}, k.Fault()), k.InstallVanishingPlugin()
		},
		breaks: func(_ SpecContext, k *scenario) error {
			k.ExpectRuntimeError(k.VanishingPlugin())
			return k.RemoveVanishingPlugin()
		},
		clears: func(_ SpecContext, k *scenario) error { return k.InstallVanishingPlugin() },
	}), Label("fault:teardown", "managed-only"), func() {
		BeforeEach(func() {
			if _, managed := rt.(runtimes.Controllable); !managed {
				skipLacking(report.NeedManaged, "the harness changes no plugin binary of an external runtime's bin dir but its own cni-fault")
			}
			Expect(sc.InstallVanishingPlugin()).To(Succeed())
			chain = func() cniconf.NetworkList {
				return cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(),
					cniconf.Opaque{Type: sc.VanishingPlugin()}, sc.Fault())
			}
		})

		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) {
				Expect(sc.RemoveVanishingPlugin()).To(Succeed())
				sc.ExpectRuntimeError(sc.VanishingPlugin())
			},
			clear: func(ctx SpecContext) { Expect(sc.InstallVanishingPlugin()).To(Succeed()) },
		})
	})

	// The runtime restarts (an upgrade, an OOM kill) while the network
	// agent is down: what it knew of the pod's network must survive, or the
	// DEL that finally passes has nothing to release.
	When("the runtime restarts between a failed Stop and the next one", KubeletScenario("teardown-runtime-restart", kubeletCase{
		family: kubeletTeardown, verb: cniconf.VerbDel,
		faults: func(k *scenario) cniconf.Fault { return k.Fault().On(cniconf.VerbDel, delFails) },
		restart: func(ctx SpecContext) error {
			ctl, ok := rt.(runtimes.Controllable)
			if !ok {
				return fmt.Errorf("%s is not managed", rt.Name())
			}
			if err := ctl.Crash(ctx); err != nil {
				return err
			}
			return ctl.Restart(ctx)
		},
	}), Label("fault:teardown", "managed-only", "kubelet:teardown-restart"), func() {
		var ctl runtimes.Controllable
		BeforeEach(func() {
			var ok bool
			if ctl, ok = rt.(runtimes.Controllable); !ok {
				skipLacking(report.NeedManaged, externalEndpoint)
			}
		})

		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) { setFaults(sc.Fault().On(cniconf.VerbDel, delFails)) },
			restart: func(ctx SpecContext) {
				Expect(ctl.Crash(ctx)).To(Succeed())
				Expect(ctl.Restart(ctx)).To(Succeed())
			},
			clear: healthy,
		})
	})
})

// itTearsDownAndLeavesNothing starts the scenario's pod, breaks its network
// (tc.inject), runs kubelet's teardown while the fault persists (around a
// runtime restart, tc.restart) and, if the pod is still there, again after
// tc.clear: the pod must be gone in the end, and nothing of it left at
// either point where it was removed.
func itTearsDownAndLeavesNothing(current func() *scenario, tc teardownCase) {
	window := cmp.Or(tc.window, teardownWindow)
	deadline := tc.deadline
	if deadline.Limit == 0 {
		deadline = scn.Within(criCallTimeout)
	}
	timeout := scenarioTimeout
	if tc.restart != nil {
		timeout += runtimeRecoverTimeout
	}
	It("is removed while the fault persists or once it clears, and leaves nothing", func(ctx SpecContext) {
		sc := current()
		By("starting a pod on the healthy network")
		id, err := sc.RunSandboxWithin(ctx, scn.Within(criCallTimeout))
		Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")

		By("breaking the pod's network")
		tc.inject(ctx)

		var removed bool
		if tc.restart == nil {
			By("tearing the pod down as kubelet does, while the fault persists")
			removed = sc.kubeletTeardown(ctx, id, window, deadline)
		} else {
			By("stopping the pod once, while the fault persists")
			removed = sc.kubeletTeardownOnce(ctx, id, deadline)
		}
		sc.ExpectFaultFired(ctx, faultFiredTimeout)
		if !removed && tc.restart != nil {
			By("restarting the runtime, then tearing the pod down again while the fault persists")
			tc.restart(ctx)
			removed = sc.kubeletTeardown(ctx, id, window, deadline)
		}
		left, err := inspect.Take(ctx, sc.Target())
		Expect(err).NotTo(HaveOccurred())
		sc.TeardownLeaks = inspect.Diff(sc.Baseline, left)
		if removed {
			sc.Teardown = report.TeardownWhileFaulted
			contract.Expect(sc.Leaks(ctx)).To(BeClean(), "the pod was removed while the fault persisted")
			return
		}

		sc.Teardown = report.TeardownNever
		if tc.clear == nil {
			leaks := sc.Leaks(ctx) // what the stuck pod holds, for the report
			contract.Expect(sc.Teardown).To(Equal(report.TeardownWhileFaulted),
				"kubelet's Stop and Remove did not remove the pod, and nothing repairs the fault")
			contract.Expect(leaks).To(BeClean())
			return
		}
		By("clearing the fault, then tearing the pod down again")
		tc.clear(ctx)
		if sc.kubeletTeardown(ctx, id, window, deadline) {
			sc.Teardown = report.TeardownAfterClear
		}
		contract.Expect(sc.Teardown).To(Equal(report.TeardownAfterClear), "kubelet's Stop and Remove did not remove the pod once the fault cleared")
		contract.Expect(sc.Leaks(ctx)).To(BeClean())
	}, SpecTimeout(timeout))
}

// kubeletTeardown retries StopPodSandbox and then RemovePodSandbox on
// kubelet's syncs for window (kubeletSyncs), each call within d, and
// reports whether the runtime no longer lists the pod.
func (sc *scenario) kubeletTeardown(ctx SpecContext, id string, window time.Duration, d scn.Deadline) bool {
	return kubeletSyncs(ctx, window, func() bool { return sc.kubeletTeardownOnce(ctx, id, d) })
}

// teardownMinRounds is how many of kubelet's syncs a window holds however
// long each takes (scn.Rounds). A window counted in time alone is one round
// where a loaded machine makes one Stop outlast it, and a fault that fails
// only the first Stop (teardown-del-error-once) would then meet no second
// one: the verdict would follow the machine's load, not the runtime.
const teardownMinRounds = scn.MinRounds

// teardownSyncs are kubelet's syncs of a teardown window.
func teardownSyncs(window time.Duration) scn.Rounds {
	return scn.Rounds{Span: window, Interval: teardownInterval, Min: teardownMinRounds}
}

// kubeletSyncs runs round on each of kubelet's syncs, teardownInterval
// apart, until it reports done, or until at least teardownMinRounds rounds
// have run and window has passed; a round in flight when the window ends
// finishes first. It reports whether a round reported done.
func kubeletSyncs(ctx SpecContext, window time.Duration, round func() bool) bool {
	return pollRounds(ctx, teardownSyncs(window), window+teardownRoundsBound, round)
}

// teardownRoundsBound bounds the minimum rounds of a window: each a Stop
// and a Remove within kubelet's deadline.
const teardownRoundsBound = teardownMinRounds * (2*criCallTimeout + teardownInterval)

// kubeletTeardownOnce is one sync's StopPodSandbox and RemovePodSandbox,
// each within d: whether the runtime no longer lists the pod after them.
// The first error is kept (StopErr): some faults show only in the runtime's
// words.
func (sc *scenario) kubeletTeardownOnce(ctx SpecContext, id string, d scn.Deadline) bool {
	call := func(name string, f func(context.Context, string) error) bool {
		err := sc.Call(ctx, name, sc.PodUID(), d, func(cctx context.Context) error { return f(cctx, id) })
		if err != nil {
			GinkgoWriter.Printf("%s %s: %v\n", name, report.Short(id), err)
			if sc.StopErr == "" {
				sc.StopErr = err.Error()
			}
			return false
		}
		return true
	}
	if !call("StopPodSandbox", rt.CRI().StopPodSandbox) || !call("RemovePodSandbox", rt.CRI().RemovePodSandbox) {
		return false
	}
	pods, err := rt.CRI().ListPodSandboxes(ctx)
	return err == nil && !slices.ContainsFunc(pods, func(p *runtimeapi.PodSandbox) bool { return p.GetId() == id })
}
