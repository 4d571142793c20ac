package testenv

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually and Consistently check.
const PollInterval = 50 * time.Millisecond

// Eventually calls check until it returns nil, and fails tb with check's
// last error once timeout has passed. Tests that look at processes, mounts
// or links wait for the state they expect with it: on a loaded machine a
// runtime's processes, a shim's exit or an exec lag behind the call that
// caused them, so one snapshot proves nothing either way.
func Eventually(tb testing.TB, timeout time.Duration, check func() error) {
	tb.Helper()
	if err := poll(timeout, check, false); err != nil {
		tb.Fatalf("still, after %v: %v", timeout, err)
	}
}

// Consistently calls check throughout d and fails tb at the first error: for
// an absence that must hold for a while (nothing is created late), where
// Eventually would succeed at once.
func Consistently(tb testing.TB, d time.Duration, check func() error) {
	tb.Helper()
	if err := poll(d, check, true); err != nil {
		tb.Fatal(err)
	}
}

// poll returns nil once check succeeds (until false) or once d has passed
// with every check succeeding (until true).
func poll(d time.Duration, check func() error, whole bool) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		err := check()
		if whole && err != nil || !whole && err == nil {
			return err
		}
		select {
		case <-deadline.C:
			if whole {
				return nil
			}
			return err
		case <-tick.C:
		}
	}
}
