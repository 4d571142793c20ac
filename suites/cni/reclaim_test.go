package cni_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Reclaim timing: kubelet retries a failed Stop/Remove on every sync; the
// harness gives it reclaimSyncs, its span and at least its minimum rounds
// however long each takes, unless an attempt shows that none can help
// (Scenario.ReclaimHopeless).
var reclaimSyncs = scn.Rounds{Span: 2 * time.Second, Interval: 500 * time.Millisecond, Min: scn.MinRounds}

// reclaimTimeout bounds the whole reclaim node: its rounds, each a Stop
// and a Remove within kubelet's deadline and an inventory.
var reclaimTimeout = reclaimSyncs.Bound(2*criCallTimeout + inventoryBound)

// reclaim acts as kubelet does after a failed RunPodSandbox: it stops and
// removes every sandbox the scenario left, with the fault still in place,
// and inventories again (scn.Scenario.ReclaimAttempt). Its outcome is the
// report's second fact; it never changes the verdict, which the strict
// check already decided.
func (sc *scenario) reclaim(ctx SpecContext) {
	sc.Reclaim, sc.ReclaimError = verdict.ReclaimOutcome(sc.Inspected, len(sc.Scenario.Leaks), func() (bool, error) {
		var lastErr error
		cleared := pollRounds(ctx, reclaimSyncs, reclaimTimeout, func() bool {
			var err error
			lastErr, err = sc.ReclaimAttempt(ctx)
			if err != nil {
				return false
			}
			if sc.ReclaimHopeless() {
				StopTrying("no sandbox is left for kubelet to stop or remove").Now()
			}
			return len(sc.ReclaimLeaks) == 0
		})
		return cleared, lastErr
	})
}
