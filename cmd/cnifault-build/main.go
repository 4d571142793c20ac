// Command cnifault-build builds managed containerd lines (or any containerd
// tag), and the kubelet, into the cache, for hack/deps.sh: the same
// builders `cnifault bisect` and kubelet mode use, so that one cache serves
// them all.
//
//	cnifault-build containerd-1.7|v1.7.35|kubelet|kubelet@v1.34.12 ...
//
// It prints each containerd bin dir, and the kubelet binary's path (plain
// `kubelet` is fixtures/kubelet's PinnedVersion). Exit status 2 on bad
// input or a failed build; every argument is checked before any build.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/kubelet"
)

// build is one argument: a containerd tag or a kubelet version.
type build struct {
	kubelet bool
	version string
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cnifault-build containerd-<line>|<tag>|kubelet[@<tag>] ...")
		os.Exit(2)
	}
	var builds []build
	for _, a := range os.Args[1:] {
		b, err := parse(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-build:", err)
			os.Exit(2)
		}
		builds = append(builds, b)
	}
	cache := containerd.DefaultCacheDir()
	for _, b := range builds {
		build := containerd.Build
		if b.kubelet {
			build = kubelet.Build
		}
		out, err := build(ctx, b.version, cache, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cnifault-build:", err)
			os.Exit(2)
		}
		fmt.Println(out)
	}
}

// parse reads one argument: kubelet, kubelet@<tag>, a managed containerd
// line or a containerd tag.
func parse(a string) (build, error) {
	if a == "kubelet" {
		return build{kubelet: true, version: kubelet.PinnedVersion}, nil
	}
	if v, ok := strings.CutPrefix(a, "kubelet@"); ok {
		if !strings.HasPrefix(v, "v1.") || strings.Count(v, ".") < 2 {
			return build{}, fmt.Errorf("%q is not a Kubernetes release tag (kubelet@v1.Y.Z)", v)
		}
		return build{kubelet: true, version: v}, nil
	}
	v := a
	if line, ok := containerd.LineOf(a); ok {
		v = line.Version
	}
	if _, err := containerd.ModulePath(v); err != nil {
		return build{}, err
	}
	return build{version: v}, nil
}
