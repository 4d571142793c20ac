package cni_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/cri"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// The wait for a runtime to take a write of its conf dir up waits for the
// runtime's event where its adapter can tell one (scn.NetworkWait): while
// the write is pending (CRI-O: its watcher has not logged the written file,
// or the reload after it has not ended: ocicni runs every plugin's VERSION
// and then waits for its write lock behind every ADD and DEL in progress,
// which a slow node stretches well past 20 s) it goes on, up to
// networkPendingBound; once nothing is pending, or where the adapter cannot
// tell (containerd), the runtime gets networkSettleTimeout and at least
// scn.MinRounds polls to show the outcome.
const (
	networkSettleTimeout = 20 * time.Second
	// networkPendingBound is kubelet's runtime-request-timeout: the
	// longest any call the harness made before the write (a Stop, a
	// Remove, the DEL behind an abandoned ADD) may hold the runtime's
	// reload. A write pending longer is a hang.
	networkPendingBound = criCallTimeout
)

// networkWaitBound bounds one wait for a network, its polls included (each
// a CRI Status within kubelet's deadline).
var networkWaitBound = newNetworkWait().Bound(criCallTimeout)

func newNetworkWait() *scn.NetworkWait {
	return &scn.NetworkWait{Settle: networkSettleTimeout, PendingBound: networkPendingBound}
}

// awaitNetwork polls the runtime's network status until check passes on
// it, for as long as scn.NetworkWait gives the runtime, and returns check's
// last failure with why the wait ended. check may end the wait at once
// with StopTrying.
func awaitNetwork(ctx context.Context, check func(st cri.NetworkStatus) error) error {
	w := newNetworkWait()
	w.Start(time.Now())
	var last error
	var why, stopped string
	quiet := NewGomega(func(message string, _ ...int) { stopped = message })
	if quiet.Eventually(func() bool {
		st, err := runtimes.Network(ctx, rt)
		if err == nil {
			err = check(st)
		}
		if last = err; err == nil {
			return true
		}
		if over, because := w.Over(time.Now(), st.Pending); over {
			why = because
			StopTrying(because).Now()
		}
		return false
	}).WithContext(ctx).WithTimeout(networkWaitBound).WithPolling(pollInterval).Should(BeTrue()) {
		return nil
	}
	switch {
	case why == "" && stopped != "":
		why = stopped
	case why == "":
		why = fmt.Sprintf("the wait's bound, %s, ran out", networkWaitBound)
	}
	if last == nil {
		last = errors.New("no poll answered")
	}
	return fmt.Errorf("%w (%s)", last, why)
}

// holds is the check that the runtime reports NetworkReady with network
// name loaded.
func holds(name string) func(st cri.NetworkStatus) error {
	return func(st cri.NetworkStatus) error {
		if !st.Ready {
			return fmt.Errorf("NetworkReady is false: %s %s (last load: %s)", st.Reason, st.Message, st.LastLoad)
		}
		if !st.HoldsNetwork(name) {
			return fmt.Errorf("the runtime holds another CNI config: %s %v", st.CNIConfig, st.Networks)
		}
		return nil
	}
}
