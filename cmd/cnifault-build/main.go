// Command cnifault-build builds managed containerd lines (or any containerd
// tag) into the cache, for hack/deps.sh: the same builder `cnifault bisect`
// uses, so that one cache serves both.
//
//	cnifault-build containerd-1.7|v1.7.35 ...
//
// It prints each bin dir. Exit status 2 on bad input or a failed build.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cnifault/cnifault/fixtures/containerd"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cnifault-build containerd-<line>|<tag> ...")
		os.Exit(2)
	}
	var versions []string
	for _, a := range os.Args[1:] {
		v := a
		if line, ok := containerd.LineOf(a); ok {
			v = line.Version
		}
		if _, err := containerd.ModulePath(v); err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-build:", err)
			os.Exit(2)
		}
		versions = append(versions, v)
	}
	cache := containerd.DefaultCacheDir()
	for _, v := range versions {
		dir, err := containerd.Build(ctx, v, cache, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-build:", err)
			os.Exit(2)
		}
		fmt.Println(dir)
	}
}
