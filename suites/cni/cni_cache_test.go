package cni_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
)

// libcni keeps each attachment's ADD result (and, for CRI-O, its config) in
// a cache entry, <cache dir>/<network>-<container id>-<ifname>, and DEL
// reads it back. An entry lost (a cleanup script, a node's disk restored)
// or cut short (a reboot in the middle of its write) must not strand a
// pod: libcni 1.2 drops an entry it cannot parse and runs DEL without it
// (containernetworking/cni issue 1055, PR 1072); multus's own cache had the
// same trap (multus-cni issue 1446). Nothing repairs the entry, so the fault persists: the pod must be
// removed with it in place, and leave nothing.
var _ = Describe("A live pod whose libcni cache entry is broken", func() {
	var sc *scenario
	current := func() *scenario { return sc }
	BeforeEach(func(ctx SpecContext) {
		sc = newScenario(ctx)
	}, NodeTimeout(scenarioSetupTimeout))
	JustBeforeEach(func(ctx SpecContext) {
		By("installing the pod's network (every verb passes)")
		sc.InstallNetwork(ctx, cniconf.NewList(sc.Network.Name, sc.Network.BridgePlugin(), sc.Fault()))
	}, NodeTimeout(scenarioSetupTimeout))

	When("the pod's libcni cache entry is lost before its teardown", KubeletScenario("cni-cache-lost", kubeletCase{
		family: kubeletTeardown,
		breaks: func(_ SpecContext, k *scenario) error { return k.breakCNICacheE("removed", os.Remove) },
		clears: persists,
	}), Label("fault:teardown", "fault:cache", "persists"), func() {
		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) { sc.breakCNICache(ctx, "removed", os.Remove) },
		})
	})

	When("the pod's libcni cache entry is truncated before its teardown", KubeletScenario("cni-cache-corrupt", kubeletCase{
		family: kubeletTeardown,
		breaks: func(_ SpecContext, k *scenario) error { return k.breakCNICacheE("truncated", truncateHalf) },
		clears: persists,
	}), Label("fault:teardown", "fault:cache", "persists"), func() {
		itTearsDownAndLeavesNothing(current, teardownCase{
			inject: func(ctx SpecContext) {
				sc.breakCNICache(ctx, "truncated", truncateHalf)
			},
		})
	})
})

// truncateHalf cuts the file at path to half its size: a write cut short.
func truncateHalf(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, st.Size()/2)
}

// persists is a kubelet case's clearing of a fault nothing repairs (label
// persists): the pod must go with it in place.
func persists(SpecContext, *scenario) error { return nil }

// breakCNICache breaks every cache entry of the scenario's pod with
// break_, and registers how the fault is seen to fire (breakCNICacheE).
func (sc *scenario) breakCNICache(ctx SpecContext, how string, break_ func(path string) error) {
	GinkgoHelper()
	Expect(sc.breakCNICacheE(how, break_)).To(Succeed())
}

// breakCNICacheE breaks every cache entry of the scenario's pod with
// break_, and registers how the fault is seen to
// fire: the runtime's teardown met the broken entry, running a
// DEL of the pod after the break (cni-fault's journal) or failing with an
// error that names the cache. It asserts nothing (kubelet mode's runs
// use it too).
func (sc *scenario) breakCNICacheE(how string, break_ func(path string) error) error {
	var entries []string
	for _, d := range rt.Inventory().CNICacheDirs {
		m, err := filepath.Glob(filepath.Join(d, sc.Network.Name+"-*"))
		if err != nil {
			return err
		}
		entries = append(entries, slices.DeleteFunc(m, func(e string) bool { return !sc.ownsCacheEntry(e) })...)
	}
	if len(entries) == 0 {
		return fmt.Errorf("no libcni cache entry of network %s for pod %s under %v", sc.Network.Name, sc.PodUID(), rt.Inventory().CNICacheDirs)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(e)
		if err != nil {
			return err
		}
		if err := break_(e); err != nil {
			return fmt.Errorf("breaking the cache entry %s: %w", e, err)
		}
		GinkgoWriter.Printf("cache entry %s %s\n", e, how)
		// A runtime that could not tear the pod down with the entry broken
		// gets it whole again before restore's teardown, so that nothing of
		// the pod, the entry included, is left on the node.
		sc.Repairs = append(sc.Repairs, func() error {
			if _, err := os.Stat(e); err != nil {
				return nil // gone with the pod, or never put back: nothing to repair
			}
			return os.WriteFile(e, raw, 0o600)
		})
	}
	broken := time.Now()
	entry := filepath.Base(entries[0])
	sc.ExpectFault(fmt.Sprintf("the runtime's teardown to meet the %s cache entry %s: a DEL of the pod after it, or an error naming the cache", how, entry),
		func(context.Context) (string, bool) {
			entries, _ := sc.Journal()
			if slices.ContainsFunc(entries, func(e cniconf.JournalEntry) bool {
				return e.Verb == cniconf.VerbDel && e.PodUID == sc.PodUID() && e.Time.After(broken)
			}) {
				return fmt.Sprintf("DEL with the cache entry %s", how), true
			}
			if strings.Contains(sc.StopErr, "cached result") {
				return "runtime error: " + strings.Join(strings.Fields(sc.StopErr), " "), true
			}
			return "", false
		})
	return nil
}

// ownsCacheEntry reports whether the cache entry at path is the scenario's
// pod's: the pod uid of its cached CNI_ARGS. A pod someone else starts on
// a shared runtime during the scenario gets the scenario's network too, and
// its entry is never the harness's to break.
func (sc *scenario) ownsCacheEntry(path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var entry struct {
		CNIArgs [][2]string `json:"cniArgs"`
	}
	return json.Unmarshal(raw, &entry) == nil && slices.Contains(entry.CNIArgs, [2]string{"K8S_POD_UID", sc.PodUID()})
}
