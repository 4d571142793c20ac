package cniconf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A fault dir holds one file per scenario ("<name>.json") that a
// long-lived fault injector (the NRI plugin, the runc wrapper) reads at
// every event, so that a scenario's fault reaches a runtime that is
// already running.

// writeFaultFile puts v into dir as name+".json", atomically: a reader
// gets the old fault or the new one, never half of one.
func writeFaultFile(dir, name string, v any) error {
	if name == "" || strings.ContainsRune(name, os.PathSeparator) {
		return fmt.Errorf("cniconf: fault name %q must be a file name", name)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

// removeFaultFile removes a scenario's fault; a missing one is not an
// error.
func removeFaultFile(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name+".json"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("cniconf: %w", err)
	}
	return nil
}

// readFaultFiles returns every fault of dir that targets a pod. A file
// that does not parse is skipped: one being written by a process killed
// mid-write, for which no pod's events may fail.
func readFaultFiles[T any](dir string, podUID func(T) string) []T {
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []T
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var f T
		if json.Unmarshal(raw, &f) == nil && podUID(f) != "" {
			out = append(out, f)
		}
	}
	return out
}
