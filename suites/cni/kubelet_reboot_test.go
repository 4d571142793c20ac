package cni_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/fixtures/criproxy"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/kubelet"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// driveReboot is node-reboot under a real kubelet: the pods start on the
// healthy network; the node reboots under them — kubelet killed outright
// with the runtime and every pod process, the runtime's mounts and state
// dir gone, the disk kept; the runtime starts again, then kubelet, as a
// node's boot starts them. Kubelet finds its static pods in their
// manifests and the old sandboxes in the runtime's list, stops and removes
// those and starts each pod again; once every pod is ready again, the pods
// are deleted and the run settles as any other.
func (k *scenario) driveReboot(ctx SpecContext, kl *kubelet.Instance, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	ctl, ok := rt.(runtimes.Controllable)
	if !ok {
		return fmt.Errorf("the harness does not control this runtime's process, pods, mounts or state dir: it cannot reboot it")
	}
	if !poll(ctx, kubeletStartBound, func() bool { return k.readyPods(ctx) == len(k.PodUIDs()) }) {
		return fmt.Errorf("%d of the %d pods started on the healthy network within %s (kubelet's calls: %s)",
			k.readyPods(ctx), len(k.PodUIDs()), kubeletStartBound, criproxy.Summary(calls()))
	}
	old := k.sandboxIDs(ctx)
	before, err := inspect.Take(ctx, k.RebootTarget())
	if err != nil {
		return fmt.Errorf("inventorying the pods before the reboot: %w", err)
	}
	if err := kl.Crash(ctx); err != nil {
		return fmt.Errorf("killing kubelet for the reboot: %w", err)
	}
	if err := ctl.Reboot(ctx); err != nil {
		return fmt.Errorf("rebooting the instance: %w", err)
	}
	after, err := inspect.Take(ctx, k.RebootTarget())
	if err != nil {
		return fmt.Errorf("inventorying the instance after the reboot: %w", err)
	}
	seen, took := scn.RebootSeen(before, after, rt.Inventory().NetNSDirs)
	k.ExpectFault("the reboot to take every pod process, netns and mount, and the state dir, before the runtime starts again",
		func(context.Context) (string, bool) { return seen, took })
	if err := ctl.Restart(ctx); err != nil {
		return fmt.Errorf("starting the runtime after the reboot: %w", err)
	}
	if err := kl.Restart(ctx); err != nil {
		return fmt.Errorf("starting kubelet after the reboot: %w", err)
	}
	if !k.SeeFired(ctx) {
		return fmt.Errorf("the reboot did not take: %s", seen)
	}
	booted := time.Now()
	// Each pod is ready again in a new sandbox; the old ones are kubelet's
	// to stop and remove, beside it or once the pods are deleted.
	again := func() int { return k.readyPodsExcept(ctx, old) }
	poll(ctx, kubeletClearedStartBound, func() bool { return again() == len(k.PodUIDs()) })
	run.Started = again()
	run.Why = fmt.Sprintf("after the reboot: %d of %d pods ready again in a new sandbox within %s (%d old sandboxes before it)",
		run.Started, len(k.PodUIDs()), time.Since(booted).Round(time.Second), len(old))
	return deletePod()
}

// sandboxIDs is the ids of every sandbox of the run's pods the runtime
// lists; none where it cannot list them.
func (k *scenario) sandboxIDs(ctx context.Context) []string {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		GinkgoWriter.Printf("ListPodSandboxes: %v\n", err)
		return nil
	}
	var ids []string
	for _, b := range boxes {
		if slices.Contains(k.PodUIDs(), b.GetMetadata().GetUid()) {
			ids = append(ids, b.GetId())
		}
	}
	return ids
}

// readyPodsExcept is how many of the run's pods have a ready sandbox that
// is none of old.
func (k *scenario) readyPodsExcept(ctx context.Context, old []string) int {
	boxes, err := rt.CRI().ListPodSandboxes(ctx)
	if err != nil {
		return 0
	}
	ready := map[string]bool{}
	for _, b := range boxes {
		uid := b.GetMetadata().GetUid()
		if slices.Contains(k.PodUIDs(), uid) && !slices.Contains(old, b.GetId()) && b.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready[uid] = true
		}
	}
	return len(ready)
}
