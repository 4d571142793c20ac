package cni_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/fixtures/criproxy"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// driveRetryRestart is nri-rejects-run-then-restart under kubelet: the NRI
// plugin rejects the pod's first nriRejections RunPodSandbox calls, which
// kubelet retries on its own (each rejected attempt is attempt 0 again:
// no sandbox of the pod is listed), and allows the next. Where that
// attempt started the pod, the runtime is killed by its PID and started
// again under it, and the pod is then deleted. The run records what the
// plain run records: whether the allowed attempt started the pod (Started,
// AllowedError) and whether the runtime came back (RuntimeBack).
func (k *scenario) driveRetryRestart(ctx SpecContext, run *report.KubeletRun, calls func() []criproxy.Call, deletePod func() error) error {
	ctl, ok := rt.(runtimes.Controllable)
	if !ok {
		return fmt.Errorf("the harness does not control this runtime's process: it cannot restart it")
	}
	if !k.seeFiredWithin(ctx, kubeletStartBound, calls) {
		return fmt.Errorf("the NRI rejection never fired for the kubelet's pod within %s (%s; kubelet's calls: %s)",
			kubeletStartBound, k.Expectations(), criproxy.Summary(calls()))
	}
	// The allowed attempt is the first RunPodSandbox after the rejections;
	// kubelet makes it after its backoff, as each retry before it.
	var allowed criproxy.Call
	poll(ctx, kubeletRetryBound+kubeletStartBound, func() bool {
		n := 0
		for _, c := range calls() {
			if c.Method != "RunPodSandbox" || c.InFlight {
				continue
			}
			if n++; n == nriRejections+1 {
				allowed = c
				return true
			}
		}
		return false
	})
	if allowed.Method == "" {
		return fmt.Errorf("kubelet made no RunPodSandbox after the %d rejections within %s (kubelet's calls: %s)",
			nriRejections, kubeletRetryBound+kubeletStartBound, criproxy.Summary(calls()))
	}
	if allowed.Failed() {
		run.AllowedError = allowed.Message
		run.Why = "kubelet's RunPodSandbox after the rejections failed: " + allowed.Message
		return deletePod()
	}
	run.Started = 1
	if err := k.ClearNRIFault(); err != nil {
		return fmt.Errorf("clearing the NRI fault: %w", err)
	}
	if err := ctl.Crash(ctx); err != nil {
		return fmt.Errorf("killing the runtime under the pod: %w", err)
	}
	logFrom := rt.LogSize()
	err := ctl.Restart(ctx)
	back := err == nil || ctl.Running()
	run.RuntimeBack = &back
	if !back {
		run.Why = "the runtime did not come back after the restart; its last log line: " + lastLine(rt.LogSince(logFrom))
		return errRuntimeDown
	}
	if err != nil {
		return fmt.Errorf("starting the runtime again: %w", err)
	}
	var listed []string
	if boxes, err := rt.CRI().ListPodSandboxes(ctx); err == nil {
		for _, b := range boxes {
			if b.GetMetadata().GetUid() == k.PodUID() {
				listed = append(listed, fmt.Sprintf("%.12s (%s)", b.GetId(), strings.TrimPrefix(b.GetState().String(), "SANDBOX_")))
			}
		}
	}
	run.Why = fmt.Sprintf("the pod started at kubelet's attempt %d; after the restart the runtime lists its sandboxes %s",
		nriRejections+1, strings.Join(listed, ", "))
	return deletePod()
}
