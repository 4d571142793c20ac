package cni_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Reclaim timing: kubelet retries a failed Stop/Remove on every sync; the
// harness gives it a few attempts within reclaimWindow, unless an attempt
// shows that none can help (Scenario.ReclaimHopeless).
const (
	reclaimWindow   = 2 * time.Second
	reclaimInterval = 500 * time.Millisecond
	// reclaimTimeout bounds the whole reclaim node.
	reclaimTimeout = reclaimWindow + 2*criCallTimeout
)

// reclaim acts as kubelet does after a failed RunPodSandbox: it stops and
// removes every sandbox the scenario left, with the fault still in place,
// and inventories again (scn.Scenario.ReclaimAttempt). Its outcome is the
// report's second fact; it never changes the verdict, which the strict
// check already decided.
func (sc *scenario) reclaim(ctx SpecContext) {
	sc.Reclaim, sc.ReclaimError = verdict.ReclaimOutcome(sc.Inspected, len(sc.Scenario.Leaks), func() (bool, error) {
		var lastErr error
		quiet := NewGomega(func(string, ...int) {})
		cleared := quiet.Eventually(func(g Gomega) {
			var err error
			lastErr, err = sc.ReclaimAttempt(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			if sc.ReclaimHopeless() {
				StopTrying("no sandbox is left for kubelet to stop or remove").Now()
			}
			g.Expect(sc.ReclaimLeaks).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(reclaimWindow).WithPolling(reclaimInterval).Should(Succeed())
		return cleared, lastErr
	})
}
