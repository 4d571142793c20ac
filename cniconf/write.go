package cniconf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// ConfDir is a runtime's CNI configuration directory.
//
// Files are written in place rather than moved in from elsewhere: containerd
// watches the directory with fsnotify and a file renamed in from another
// directory arrives as a Create event, which it ignores (containerd issue
// 11715). A temporary name inside the directory that no runtime loads (it
// does not end in .conf, .conflist or .json) followed by a rename arrives as
// Rename, which triggers a reload. The directory itself is never removed:
// newer containerd stops its CRI service when it disappears.
type ConfDir string

// WriteList writes the list as file (e.g. "10-cnifault.conflist").
func (d ConfDir) WriteList(file string, l NetworkList) error {
	raw, err := l.Bytes()
	if err != nil {
		return err
	}
	return d.WriteRaw(file, raw)
}

// WriteRaw writes arbitrary bytes as file: the way to install a malformed
// config on purpose.
func (d ConfDir) WriteRaw(file string, content []byte) error {
	if strings.ContainsRune(file, os.PathSeparator) {
		return fmt.Errorf("cniconf: %q must be a file name, not a path", file)
	}
	if !strings.Contains(file, HarnessMark) {
		return fmt.Errorf("cniconf: %q must carry %q, so that the harness can tell its files from the node's", file, HarnessMark)
	}
	tmp, err := os.CreateTemp(string(d), "."+file+".tmp-*")
	if err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after a successful rename
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fmt.Errorf("cniconf: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("cniconf: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cniconf: close %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(string(d), file)); err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	return nil
}

// HarnessMark is in the name of every file the harness writes into a conf
// dir: the harness removes only files that carry it.
const HarnessMark = "cnifault"

// Clear removes the harness's files from the directory (names carrying
// HarnessMark), leaving the directory and everybody else's files.
func (d ConfDir) Clear() error {
	entries, err := os.ReadDir(string(d))
	if err != nil {
		return fmt.Errorf("cniconf: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.Contains(e.Name(), HarnessMark) {
			continue
		}
		if err := os.Remove(filepath.Join(string(d), e.Name())); err != nil {
			return fmt.Errorf("cniconf: %w", err)
		}
	}
	return nil
}

// Snapshot returns the directory's files and contents, for diagnostics.
func (d ConfDir) Snapshot() (map[string][]byte, error) {
	entries, err := os.ReadDir(string(d))
	if err != nil {
		return nil, fmt.Errorf("cniconf: %w", err)
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(string(d), e.Name()))
		if err != nil {
			return nil, fmt.Errorf("cniconf: %w", err)
		}
		out[e.Name()] = raw
	}
	return out, nil
}
