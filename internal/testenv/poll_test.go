package testenv

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeTB records a Fatal instead of ending the test, so that the helpers'
// failures can be checked.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = "fatal"
	if len(args) > 0 {
		if err, ok := args[len(args)-1].(error); ok {
			f.failed = err.Error()
		}
	}
}

func (f *fakeTB) Fatal(args ...any) {
	f.failed = "fatal"
	if err, ok := args[0].(error); ok {
		f.failed = err.Error()
	}
}

func TestEventuallyWaitsForTheState(t *testing.T) {
	calls := 0
	f := &fakeTB{TB: t}
	Eventually(f, 5*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if f.failed != "" || calls != 3 {
		t.Fatalf("failed %q after %d calls", f.failed, calls)
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	f := &fakeTB{TB: t}
	start := time.Now()
	Eventually(f, 200*time.Millisecond, func() error { return errors.New("never there") })
	if !strings.Contains(f.failed, "never there") || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("failed %q after %v", f.failed, time.Since(start))
	}
}

func TestConsistentlyFailsAtTheFirstError(t *testing.T) {
	calls := 0
	f := &fakeTB{TB: t}
	Consistently(f, 5*time.Second, func() error {
		if calls++; calls == 2 {
			return errors.New("appeared")
		}
		return nil
	})
	if f.failed != "appeared" || calls != 2 {
		t.Fatalf("failed %q after %d calls", f.failed, calls)
	}
	f = &fakeTB{TB: t}
	Consistently(f, 200*time.Millisecond, func() error { return nil })
	if f.failed != "" {
		t.Fatalf("failed %q on a state that held", f.failed)
	}
}
