package cni_test

import (
	"errors"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// Reclaim timing: kubelet retries a failed Stop/Remove on every sync; the
// harness gives it a few attempts within reclaimWindow.
const (
	reclaimWindow   = 3 * time.Second
	reclaimInterval = time.Second
	// reclaimTimeout bounds the whole reclaim node.
	reclaimTimeout = reclaimWindow + 2*criCallTimeout
)

// reclaim acts as kubelet does after a failed RunPodSandbox: it stops and
// removes every sandbox the scenario left, with the fault still in place,
// and inventories again. Its outcome is the report's second fact; it never
// changes the verdict, which the strict check already decided.
func (sc *scenario) reclaim(ctx SpecContext) {
	sc.reclaimState, sc.reclaimErr = verdict.ReclaimOutcome(sc.inspected, len(sc.leaks), func() (bool, error) {
		var lastErr error
		quiet := NewGomega(func(string, ...int) {})
		cleared := quiet.Eventually(func(g Gomega) {
			lastErr = sc.stopAndRemoveLeftovers(ctx)
			sc.markOwnFromJournal()
			after, err := inspect.Take(ctx, sc.target())
			g.Expect(err).NotTo(HaveOccurred())
			sc.afterReclaim = after
			sc.reclaimLeaks = inspect.Diff(sc.baseline, after)
			g.Expect(sc.reclaimLeaks).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(reclaimWindow).WithPolling(reclaimInterval).Should(Succeed())
		return cleared, lastErr
	})
}

// stopAndRemoveLeftovers stops and removes this run's sandboxes that were
// not there before the scenario, and returns the runtime's errors. Pods of
// others on a shared runtime are never touched.
func (sc *scenario) stopAndRemoveLeftovers(ctx SpecContext) error {
	pods, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	scope := sc.target().Scope
	for _, p := range pods {
		if !scope.Owns(p) {
			continue
		}
		if slices.ContainsFunc(sc.baseline.Resources, func(r inspect.Resource) bool {
			return r.Kind == inspect.KindSandbox && r.ID == p.GetId()
		}) {
			continue
		}
		if err := rt.CRI().StopPodSandbox(ctx, p.GetId()); err != nil {
			errs = append(errs, err)
		}
		if err := rt.CRI().RemovePodSandbox(ctx, p.GetId()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
