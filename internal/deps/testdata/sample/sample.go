// Package sample is what deps.Scan must find programs in: one of each way
// the project's code executes a program by name.
package sample

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
)

func uses(ctx context.Context, dir, state string) {
	_ = exec.Command("prog-command", "-x")
	_ = exec.CommandContext(ctx, "/usr/sbin/prog-context")
	_, _ = exec.LookPath("prog-lookpath")
	_ = syscall.Exec("prog-exec", nil, nil)
	_ = exec.CommandContext(ctx, filepath.Join(dir, "prog-join"), "--version")
	_ = exec.Command("sh", "-c", "prog-script-a 300 & wait; X=1 exec prog-script-b && \"$@\"")
	_ = exec.Command("/bin/sh", "-c", "prog-script-c "+state+"/*.pid")
	_ = exec.Command("unshare", "--net", "--", "prog-unshared", "--bind")
	_ = []string{"/usr/local/bin/prog-path"}
	_ = exec.Command(dir, "not-a-program")
	_ = exec.Command("sh", "-c", `"$@"; exit $?`, "sh")
}
