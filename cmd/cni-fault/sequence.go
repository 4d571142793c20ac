package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cnifault/cnifault/cniconf"
)

// counterKey names whose invocations are counted together. Runtimes retry and
// may run a pod's ADD concurrently with another pod's, so a "fail once" fault
// must mean once per pod, not once per node.
func counterKey(verb cniconf.Verb, pod string) string {
	switch {
	case verb == cniconf.VerbStatus || verb == cniconf.VerbGC:
		return "_node"
	case pod == "":
		return "_all"
	default:
		return sanitise(pod)
	}
}

// sanitise makes a pod uid a file name component. Escaping (rather than
// replacing) keeps it injective, and '_' is escaped so that no uid can
// collide with "_all" or "_node".
func sanitise(uid string) string {
	var b strings.Builder
	for _, c := range []byte(uid) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > 128 {
		sum := sha256.Sum256([]byte(uid))
		return "sha256-" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// counterPath is the state file of one (pod, verb) pair.
func counterPath(stateDir string, verb cniconf.Verb, pod string) string {
	return filepath.Join(stateDir, counterKey(verb, pod)+"-"+string(verb)+".count")
}

// nextInvocation returns this invocation's 0-based number and records it. The
// flock makes read-increment-write atomic across concurrent plugin processes;
// it is released before any action runs, so a hanging invocation never blocks
// the next one.
func nextInvocation(path string) (int, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := cniconf.Lock(f); err != nil {
		return 0, fmt.Errorf("lock %s: %w", path, err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	n := 0
	if s := strings.TrimSpace(string(raw)); s != "" {
		if n, err = strconv.Atoi(s); err != nil {
			return 0, fmt.Errorf("%s: corrupt counter %q", path, s)
		}
	}
	next := []byte(strconv.Itoa(n+1) + "\n")
	if _, err := f.WriteAt(next, 0); err != nil {
		return 0, err
	}
	if err := f.Truncate(int64(len(next))); err != nil {
		return 0, err
	}
	return n, nil
}
