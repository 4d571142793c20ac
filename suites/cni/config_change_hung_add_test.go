package cni_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/host"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/stacks"
	"github.com/maruel/panicparse/v2/stack"
)

// besideHangBound is how long a healthy pod's RunPodSandbox may take while
// another pod's ADD hangs: scn.HangReach, the bound the harness gives any
// runtime to reach a plugin on a loaded 2-core node, far beyond the seconds
// a whole healthy RunPodSandbox takes there (report.json's slowest_call
// shows them). A call still running then is held behind the hung ADD, not
// slow: the harness stops the hung plugin, as the first pod's own deadline
// would, and the held call goes on within kubelet's deadline. A managed
// runtime's goroutine dump proves a held call before the bound
// (heldProof).
const besideHangBound = scn.HangReach

// stackDumpTimeout bounds one goroutine dump: a signal, a file of a few
// hundred kilobytes, read once the daemon closed it.
const stackDumpTimeout = 10 * time.Second

// A CNI agent rewrites its conflist (a DaemonSet's restart, an upgrade)
// while one pod's ADD hangs. The runtime's reload must not hold every
// other pod's network setup behind the hung ADD. A runtime that guards its
// networks with a sync.RWMutex, ADD under the read lock and the reload
// under the write lock, does: the reload waits for the hung ADD, and Go's
// RWMutex lets no new reader past a waiting writer, so every later pod's
// network setup waits with it (found on CRI-O while building
// storm-add-hang: ocicni's syncNetworkConfig and forEachNetwork).
var _ = Describe("RunPodSandbox beside a pod whose ADD hangs", func() {
	var sc *scenario

	When("the conf dir is rewritten while one pod's ADD hangs, and another pod starts", KubeletScenario("config-change-during-hung-add", kubeletCase{
		family: kubeletBesideHang, verb: cniconf.VerbAdd,
		faults: func(k *scenario) cniconf.Fault {
			return k.firstPodFault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
		},
		chain:   func(k *scenario) (cniconf.NetworkList, error) { return k.chain(k.firstPodFault()), nil },
		rewrite: func(ctx SpecContext, k *scenario) error { return k.rewriteRangeQuietly(ctx) },
	}), Label("fault:hang", "kubelet:pod-beside-hang", report.LabelManagedOnly), func() {
		BeforeEach(func(ctx SpecContext) {
			// Where the runtime guards its networks as the scenario
			// suspects, every pod's network setup on the node waits for
			// the hang, and on a node's own runtime those are other
			// people's pods.
			if _, managed := rt.(runtimes.Controllable); !managed {
				skipLacking(report.NeedManaged, "the runtime is external: on a node's own runtime, a reload held behind the hung ADD would hold the node's other pods' network setup too")
			}
			sc = newScenario(ctx)
			By("installing bridge, then cni-fault (ADD: hang once for the first pod, then pass)")
			sc.InstallFaultsFileNetwork(ctx, sc.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass()))
			DeferCleanup(sc.stopHungPlugins)
		}, NodeTimeout(scenarioSetupTimeout))

		It("starts the other pod while the ADD hangs, then leaves nothing once the hung ADD is stopped", func(ctx SpecContext) {
			By("starting the first pod, with kubelet's deadline")
			first := sc.StartPodsAtOnce(ctx, scn.Within(criCallTimeout), 0, []int{0})

			By("checking that its ADD hangs")
			hung := sc.expectHungAdd(ctx, first)

			By("rewriting the scenario's list in place, its IPv4 range moved to the subnet's upper half, as a CNI agent does")
			rewritten, marker, err := sc.rewriteRange(ctx)
			Expect(err).NotTo(HaveOccurred(), "rewriting the scenario's list")
			dumps := sc.stackDumps()
			met := sc.awaitRewriteMet(ctx, dumps, rewritten.Name, marker)
			GinkgoWriter.Printf("the runtime met the write: %s\n", met)

			By(fmt.Sprintf("starting a second pod on the healthy network while the first pod's ADD hangs (bound %s)", besideHangBound))
			second := sc.PodConfigOf(1, 0)
			var id string
			var runErr error
			done := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(done)
				id, runErr = sc.RunPod(ctx, scn.Within(criCallTimeout), second)
			}()
			// The runtime's goroutine dump, where the harness can ask for
			// one, proves a held call at once; only without one does the
			// harness wait out the bound.
			var proof string
			quiet := NewGomega(func(string, ...int) {})
			quiet.Eventually(func() bool {
				if isClosed(done) {
					return true
				}
				proof = sc.heldProof(ctx, dumps, hung)
				return proof != ""
			}).WithContext(ctx).WithTimeout(besideHangBound).WithPolling(pollInterval).Should(BeTrue())
			inTime := proof == "" && isClosed(done)
			// Whether the first pod's ADD still hung when the second call
			// returned (or at the bound): a call that returned only once
			// the hang ended was held by it, whatever ended it.
			stillHung := host.Alive(hung)
			var released time.Time
			if !inTime {
				By("stopping the hung ADD, as the first pod's own deadline would, and waiting for the second pod's call")
				released = time.Now()
				sc.stopHungPlugins()
				Eventually(done).WithContext(ctx).WithTimeout(criCallTimeout).Should(BeClosed(), "the second pod's call outlived its deadline")
			}
			if id != "" {
				removeAfterSpec(id)
			}
			held := sc.heldBehindHang(second.GetMetadata().GetUid(), released)
			startedBeside := proof == "" && inTime && stillHung && runErr == nil
			sc.BesideHangStarted = &startedBeside

			By("stopping the hung ADD and waiting for the first pod's call")
			sc.stopHungPlugins()
			first.Wait()

			By("tearing down what both calls left, as kubelet does")
			sc.kubeletRemovesFailedSandboxes(ctx)

			// Inventoried before any verdict, so that the report holds what
			// was left whichever part of the contract failed.
			By("inventorying the instance within the settle window")
			left, _ := sc.leaksSettle(ctx)

			sc.expectStartedAgain(ctx, runErr, "the second pod's start beside the hung ADD")
			if proof != "" {
				contract.Expect(proof == "").To(BeTrue(),
					"the second pod's network setup was held behind the first pod's hung ADD after a conf-dir write (the runtime met the write: %s): %s; %s",
					met, proof, held)
			} else {
				contract.Expect(inTime && stillHung).To(BeTrue(),
					"the second pod did not start within %s while the first pod's ADD still hung after a conf-dir write (the runtime met the write: %s): %s",
					besideHangBound, met, held)
			}
			contract.Expect(left).To(BeClean())
		}, SpecTimeout(scenarioTimeout))
	})
})

// firstPodFault is the scenario's cni-fault targeted at its first pod
// alone: the other pods' calls are journaled, never faulted (the second
// pod beside the first one's hung ADD, under kubelet as in the plain run,
// whose scenario has one pod).
func (sc *scenario) firstPodFault() cniconf.Fault {
	f := sc.Fault()
	f.PodUIDs = nil
	return f
}

// rewriteRange rewrites the scenario's list in place, its IPv4 range moved
// to the subnet's upper half, as a CNI agent does on a restart, and tells
// the runtime; it returns the list and the range's first address.
func (sc *scenario) rewriteRange(ctx context.Context) (cniconf.NetworkList, string, error) {
	marker := subnetAddress(sc.Network.Subnet, 128)
	bridge := sc.Network.BridgePlugin()
	bridge.IPAM.Ranges = [][]cniconf.Range{{{Subnet: sc.Network.Subnet, RangeStart: marker}}}
	rewritten := cniconf.NewList(sc.Network.Name, bridge, sc.firstPodFault())
	if err := sc.UseList(rewritten); err != nil {
		return rewritten, marker, err
	}
	if err := cniconf.ConfDir(rt.CNIConfDir()).WriteList(confFile, rewritten); err != nil {
		return rewritten, marker, err
	}
	if err := runtimes.NetworkConfigChanged(ctx, rt); err != nil {
		return rewritten, marker, fmt.Errorf("the runtime did not take up the new config: %w", err)
	}
	return rewritten, marker, nil
}

// awaitRewriteMet waits, as a harness step, until the runtime has met the
// harness's rewrite of the list name, whose range starts at marker, and
// says how: it holds the rewritten list (the marker shows in its CNI
// config dump, where it gives one), its watcher's reload has read the conf
// dir and has not ended (ReloadRead), or CRI Status does not answer within
// kubelet's period (its network status waits for the same lock the reload
// does). Only then can a second pod meet the reload rather than race it. A
// reload still reading is not enough: ocicni runs every plugin's VERSION
// before it asks for its write lock, and a pod that takes the read lock
// first is not held (it passed so on a loaded crio-1.36).
func (sc *scenario) awaitRewriteMet(ctx SpecContext, dumps *stackDumps, name, marker string) string {
	GinkgoHelper()
	// The runtime's events where it shows them: a reload still reading is
	// at work on the write (Reloading), as is one whose watcher has not
	// logged the write yet (Pending), and the wait goes on (awaitNetwork).
	w := newNetworkWait()
	w.Start(time.Now())
	var met, why string
	var last error
	quiet := NewGomega(func(string, ...int) {})
	quiet.Eventually(func() bool {
		// A reload waiting for its write lock has met the write; on a
		// runtime whose CRI Status waits for the same lock, that is known
		// before Status's deadline.
		if gs, _, ok := dumps.take(ctx); ok {
			if at, ok := stacks.WaitingReload(gs); ok {
				met = "its reload waits behind the hung ADD's read lock (goroutine dump: " + at + ")"
				return true
			}
		}
		cctx, cancel := context.WithTimeout(ctx, statusAnswerDeadline)
		defer cancel()
		st, err := runtimes.Network(cctx, rt)
		if err != nil && cctx.Err() != nil && ctx.Err() == nil {
			met = fmt.Sprintf("CRI Status did not answer within %s: its network status waits for the reload", statusAnswerDeadline)
			return true
		}
		pending := false
		switch {
		case err != nil:
			last = err
		case st.ReloadRead:
			met = "its watcher met the write, and its reload read the conf dir and has not ended"
			return true
		case st.Reloading:
			last, pending = errors.New("the runtime's reload of the conf dir is still reading it"), true
		case st.HoldsNetwork(name) && (st.CNIConfig == "" || strings.Contains(st.CNIConfig, marker)):
			met = "it holds the rewritten list"
			return true
		case !st.HoldsNetwork(name):
			last, pending = fmt.Errorf("the runtime has not met the rewrite: %s %v", st.CNIConfig, st.Networks), st.Pending
		default:
			last, pending = fmt.Errorf("the runtime still holds the list from before the rewrite (no %s in %s)", marker, st.CNIConfig), st.Pending
		}
		if over, because := w.Over(time.Now(), pending); over {
			why = because
			StopTrying(because).Now()
		}
		return false
	}).WithContext(ctx).WithTimeout(networkWaitBound).WithPolling(pollInterval).Should(BeTrue())
	Expect(met).NotTo(BeEmpty(), "the runtime did not meet the rewrite of network %q: %v (%s)", name, last, why)
	return met
}

// heldProof says whether the runtime's goroutine dump shows a pod's
// RunPodSandbox held behind a reload waiting for the read lock the hung
// ADD (its plugin pid hung) holds, and what it shows; "" while it does
// not, or where no dump is due or can be had. The plugin alive before and
// after the dump is what makes it proof: the holder's call did not end
// around it, so the waiter cannot go on until the hang ends.
func (sc *scenario) heldProof(ctx SpecContext, dumps *stackDumps, hung int) string {
	if !host.Alive(hung) {
		return ""
	}
	gs, at, ok := dumps.take(ctx)
	if !ok {
		return ""
	}
	h, held := stacks.HeldBehindReload(gs)
	if !held || !host.Alive(hung) {
		return ""
	}
	return fmt.Sprintf("the runtime's goroutine dump at %s, with the hung ADD (pid %d) alive before and after it, shows %s",
		at.Format("15:04:05.000"), hung, h)
}

// stackDumps asks the runtime for goroutine dumps, at most one a second,
// and no more after the first that fails: each dump may take up to
// stackDumpTimeout, and a runtime that stalls one must not use up the
// windows of the checks that do without (CRI Status, the bound).
type stackDumps struct {
	sc     *scenario
	dumper runtimes.StackDumper // nil: the harness cannot ask this runtime
	last   time.Time
	failed bool
}

func (sc *scenario) stackDumps() *stackDumps {
	dumper, _ := rt.(runtimes.StackDumper)
	return &stackDumps{sc: sc, dumper: dumper}
}

// take returns a new dump, parsed, and when it was asked for; ok is false
// when none is due or none can be had. The dump is kept for the
// scenario's diagnostics; one that fails is logged.
func (d *stackDumps) take(ctx SpecContext) (gs []*stack.Goroutine, at time.Time, ok bool) {
	if d.dumper == nil || d.failed || time.Since(d.last) < time.Second {
		return nil, at, false
	}
	d.last = time.Now()
	dctx, cancel := context.WithTimeout(ctx, stackDumpTimeout)
	defer cancel()
	dump, err := d.dumper.Stacks(dctx)
	if err == nil {
		d.sc.Stacks = dump
		if gs, err = stacks.Parse(dump); err == nil {
			return gs, d.last, true
		}
	}
	d.failed = true
	GinkgoWriter.Printf("no goroutine dump of the runtime (the scenario asks for none again): %v\n", err)
	return nil, at, false
}

// isClosed tells whether ch is closed, without waiting.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// heldBehindHang says, for the failure message, where the second pod's ADD
// (uid; cni-fault journals every pod's) stood against the hang's release
// at released (zero: the harness did not release it).
func (sc *scenario) heldBehindHang(uid string, released time.Time) string {
	for _, e := range sc.journal() {
		if e.PodUID != uid || e.Verb != cniconf.VerbAdd {
			continue
		}
		if !released.IsZero() && e.Time.After(released) {
			return fmt.Sprintf("its ADD reached cni-fault only %s after the harness stopped the hung ADD: its network setup was held behind it",
				e.Time.Sub(released).Round(time.Millisecond))
		}
		return fmt.Sprintf("its ADD reached cni-fault at %s", e.Time.Format("15:04:05.000"))
	}
	return "its ADD never reached cni-fault"
}

// subnetAddress is the address numbered n in the IPv4 /24 subnet.
func subnetAddress(subnet string, n byte) string {
	GinkgoHelper()
	_, s, err := net.ParseCIDR(subnet)
	Expect(err).NotTo(HaveOccurred())
	ip := make(net.IP, net.IPv4len)
	copy(ip, s.IP.To4())
	ip[3] = n
	return ip.String()
}
