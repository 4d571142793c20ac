package cni_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/fixtures/report"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// RunPodsAtOnceE calls RunPodSandbox for the scenario's pods numbered
// pods, all at once, at kubelet's attempt number attempt, each with the
// client deadline d, and returns each call's error in pods' order. A pod
// that did start is stopped and removed after the spec.
func (sc *scenario) RunPodsAtOnceE(ctx SpecContext, d scn.Deadline, attempt uint32, pods []int) []error {
	GinkgoHelper()
	sc.takeBaseline(ctx)
	if sc.RunStarted.IsZero() {
		sc.RunStarted = time.Now()
	}
	errs := make([]error, len(pods))
	ids := make([]string, len(pods))
	var wg sync.WaitGroup
	for i, k := range pods {
		wg.Go(func() {
			defer GinkgoRecover()
			ids[i], errs[i] = sc.RunPod(ctx, d, sc.PodConfigOf(k, attempt))
		})
	}
	wg.Wait()
	removeAfterSpec(slices.DeleteFunc(ids, func(id string) bool { return id == "" })...)
	return errs
}

// podCalls are RunPodSandbox calls made at once that may not have returned
// yet (StartPodsAtOnce).
type podCalls struct {
	wg   sync.WaitGroup
	done []atomic.Bool
	ids  []string
	errs []error
}

// StartPodsAtOnce is RunPodsAtOnceE without waiting for the calls: a
// runtime may hold them (a CRI-O that was never ready, until a network
// loads). Wait returns their errors.
func (sc *scenario) StartPodsAtOnce(ctx SpecContext, d scn.Deadline, attempt uint32, pods []int) *podCalls {
	GinkgoHelper()
	sc.takeBaseline(ctx)
	if sc.RunStarted.IsZero() {
		sc.RunStarted = time.Now()
	}
	c := &podCalls{done: make([]atomic.Bool, len(pods)), ids: make([]string, len(pods)), errs: make([]error, len(pods))}
	for i, k := range pods {
		c.wg.Go(func() {
			defer GinkgoRecover()
			c.ids[i], c.errs[i] = sc.RunPod(ctx, d, sc.PodConfigOf(k, attempt))
			c.done[i].Store(true)
		})
	}
	return c
}

// Wait waits for every call and returns their errors in the pods' order; a
// pod that did start is stopped and removed after the spec.
func (c *podCalls) Wait() []error {
	c.wg.Wait()
	removeAfterSpec(slices.DeleteFunc(slices.Clone(c.ids), func(id string) bool { return id == "" })...)
	return c.errs
}

// podRange is the pod numbers from..to-1.
func podRange(from, to int) []int {
	var out []int
	for k := from; k < to; k++ {
		out = append(out, k)
	}
	return out
}

// failed counts the calls that returned an error.
func failed(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}

// kubeletRemovesFailedSandboxes stops and removes every sandbox the
// scenario's failed calls left, as kubelet's next syncs do, retrying for
// teardownWindow (and at least teardownMinRounds syncs) while the runtime
// still lists one.
func (sc *scenario) kubeletRemovesFailedSandboxes(ctx SpecContext) {
	kubeletSyncs(ctx, teardownWindow, func() bool {
		if err := sc.StopAndRemoveLeftovers(ctx); err != nil {
			GinkgoWriter.Printf("kubelet's teardown: %v\n", err)
		}
		return sc.ReclaimSandboxes == 0
	})
}

// leakCounts counts what the scenario left now, by kind (the settling
// kinds given their window, as Leaks does).
func (sc *scenario) leakCounts(ctx SpecContext) map[string]int {
	GinkgoHelper()
	return report.CountKinds(sc.Leaks(ctx).Leaks)
}
