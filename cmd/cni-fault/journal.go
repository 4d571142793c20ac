package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cnifault/cnifault/cniconf"
)

// appendJournal writes one line before the action runs, so that the harness
// sees invocations that crash or hang. Each line goes out in a single write
// under an flock: O_APPEND alone does not promise that concurrent writers'
// lines never interleave on every filesystem.
func appendJournal(path string, e cniconf.JournalEntry) error {
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
	if err := flock(f); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if _, err := f.Write(line); err != nil {
		return err
	}
	return f.Close()
}
