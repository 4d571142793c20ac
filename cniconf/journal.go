package cniconf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// AppendJournal writes one line to a fault plugin's journal. The plugins
// write it before they act, so that the harness sees invocations that crash
// or hang. Each line goes out in a single write under an flock: O_APPEND
// alone does not promise that concurrent writers' lines never interleave on
// every filesystem.
func AppendJournal(path string, e JournalEntry) error {
	if path == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Lock(f); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if _, err := f.Write(line); err != nil {
		return err
	}
	return f.Close()
}

// Lock takes an exclusive flock that lasts until f is closed or the process
// dies, so a crashed plugin can never leave the lock held.
func Lock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}

// Pick returns the step covering invocation n (0-based) of a sequence, or
// -1 and a pass once a sequence of finite steps is exhausted (or there is
// none): a fault is a bounded disturbance unless a step says "forever"
// with count 0.
func Pick(steps []Step, n int) (int, Step) {
	end := 0
	for i, s := range steps {
		if s.Count == 0 {
			return i, s
		}
		end += s.Count
		if n < end {
			return i, s
		}
	}
	return -1, Pass()
}
