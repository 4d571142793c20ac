// Package modsrc builds a program inside a writable copy of its Go module's
// own source tree, as fixtures/containerd and fixtures/kubelet build theirs:
// there the module's go.mod is the main module's, so that its replace and
// exclude directives hold, which `go install pkg@version` refuses.
package modsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Module is a module version the go command downloaded.
type Module struct {
	// Dir is its extracted source in the module cache (read-only).
	Dir string
	// Revision is the commit the module proxy says the version came from,
	// "" where it recorded none.
	Revision string
}

// Download fetches a module version into the module cache, asking the
// proxy for it by name (a proxy serves tags its list omits). The go
// command's output goes to log when it fails.
func Download(ctx context.Context, module, version string, log io.Writer) (Module, error) {
	var dl bytes.Buffer
	if err := Go(ctx, "/", &dl, nil, "mod", "download", "-json", module+"@"+version); err != nil {
		log.Write(dl.Bytes())
		return Module{}, err
	}
	var info struct {
		Dir, Error string
		Origin     *struct{ Hash string }
	}
	if err := json.Unmarshal(dl.Bytes(), &info); err != nil || info.Dir == "" {
		return Module{}, fmt.Errorf("go mod download %s@%s: %s%v", module, version, info.Error, err)
	}
	m := Module{Dir: info.Dir}
	if info.Origin != nil {
		m.Revision = info.Origin.Hash
	}
	return m, nil
}

// CopyTree downloads a module version and copies its source to dst, which
// must not exist: writable, where the build may write (go.sum).
func CopyTree(ctx context.Context, module, version, dst string, log io.Writer) (Module, error) {
	m, err := Download(ctx, module, version, log)
	if err != nil {
		return Module{}, err
	}
	if err := os.CopyFS(dst, os.DirFS(m.Dir)); err != nil {
		return Module{}, fmt.Errorf("copy %s: %w", m.Dir, err)
	}
	return m, nil
}

// Go runs the go command in dir with the module as the only one (no
// workspace: a module may ship a go.work of its own) and missing
// requirements resolved (-mod=mod: a module zip leaves its vendored
// packages out),
// its output to log.
func Go(ctx context.Context, dir string, log io.Writer, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOWORK=off"}, env...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Lock takes an exclusive flock on path, calling waiting once if another
// holder makes it wait: two builds of one version at once (make deps
// beside a bisect) take turns.
func Lock(path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		waiting()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { f.Close() }, nil
}
