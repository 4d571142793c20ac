package modsrc

import (
	"path/filepath"
	"testing"
)

// A second holder waits for the first, says so once, and gets the lock
// when the first lets go.
func TestLockTakesTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "build.lock")
	unlock, err := Lock(path, func() { t.Error("the first holder waited") })
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	got := make(chan error)
	go func() {
		unlock2, err := Lock(path, func() { close(waited) })
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	select {
	case <-waited:
	case err := <-got:
		t.Fatalf("the second holder got the lock while the first held it, without waiting: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("the second holder got the lock while the first held it: %v", err)
	default:
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
