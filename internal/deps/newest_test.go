package deps_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/modproxy"
	"github.com/cnifault/cnifault/fixtures/modproxy/modproxytest"
	"github.com/cnifault/cnifault/internal/testenv"
)

// Each line of the runtime tables is pinned to the newest tag of its
// release line that the Go module proxy serves. The proxy lists fewer tags
// than it serves (containerd v1.6.37 and v1.6.38, served, are not listed;
// cri-o's list is refused outright), so a newer patch is looked for as
// cnifault bisect looks for tags: listed, or served when asked for by name
// (fixtures/modproxy), asking past the pinned patch until modproxy.Misses
// in a row are refused.

// liveCheckEnv turns the check against the real proxy on: `make lint` sets
// it. It is not part of `make unit`, whose verdict must not change the day
// upstream publishes a patch; its logic is (TestAStaleLineIsNamed).
const liveCheckEnv = "CNIFAULT_CHECK_NEWEST"

// familyModules is the Go module of a family's tags of a major: containerd's
// (fixtures/containerd ModulePath), CRI-O's (hack/build-crio.sh's
// CRIO_MODULE).
func familyModules(t *testing.T) map[string]func(uint64) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "hack", "build-crio.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CRIO_MODULE=(\S+)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("hack/build-crio.sh sets no CRIO_MODULE")
	}
	crio := string(m[1])
	return map[string]func(uint64) string{
		"containerd": func(major uint64) string {
			mod, err := containerd.ModulePath(fmt.Sprintf("v%d.0.0", major))
			if err != nil {
				panic(err)
			}
			return mod
		},
		"crio": func(uint64) string { return crio },
	}
}

// staleLines is one message for each line of table whose pinned tag is not
// the newest its release line has on the proxy, or is not served at all.
func staleLines(ctx context.Context, src modproxy.Source, module func(uint64) string, table string, lines []runtimeLine) ([]string, error) {
	var out []string
	for _, l := range lines {
		v, err := semver.StrictNewVersion(strings.TrimPrefix(l.version, "v"))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", table, l.line, l.version, err)
		}
		f := modproxy.Finder{Source: src, Module: module}
		found, err := f.Newest(ctx, v.Major(), v.Minor(), v.Patch())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", table, l.line, l.name, err)
		}
		if len(found.Tags) == 0 || found.Tags[0].Name != l.version {
			out = append(out, fmt.Sprintf("%s:%d: %s pins %s, which the Go module proxy (%s) neither lists nor serves when asked",
				table, l.line, l.name, l.version, module(v.Major())))
			continue
		}
		if newest := found.Tags[len(found.Tags)-1]; newest.Name != l.version {
			how := "listed"
			if !newest.Listed {
				how = "served when asked by name, not listed"
			}
			var newer []string
			for _, t := range found.Tags[1:] {
				newer = append(newer, t.Name)
			}
			out = append(out, fmt.Sprintf("%s:%d: %s pins %s, but the Go module proxy has %s (newest %s: %s)",
				table, l.line, l.name, l.version, strings.Join(newer, ", "), newest.Name, how))
		}
	}
	return out, nil
}

// The check's logic on a fake proxy: a newer patch the list omits is found
// by name; a line whose list is refused (cri-o) is found by name alone; a
// pin the proxy does not serve is named; an up-to-date table passes.
func TestAStaleLineIsNamed(t *testing.T) {
	p := modproxytest.Start(t, map[string]modproxytest.Module{
		"github.com/containerd/containerd": {Listed: strings.Fields("v1.6.36 v1.7.34 v1.7.35"), Served: strings.Fields("v1.6.37 v1.6.38 v1.7.36")},
		"github.com/cri-o/cri-o":           {ListRefused: true, Served: strings.Fields("v1.35.2 v1.36.3 v1.36.5")},
	})
	mods := familyModules(t)
	src := &modproxy.Client{Proxies: []modproxy.Proxy{{URL: p.URL}}}
	for _, c := range []struct {
		family string
		lines  []runtimeLine
		want   []string
	}{
		{"containerd", []runtimeLine{{"containerd-1.6", "v1.6.38", 3}, {"containerd-1.7", "v1.7.35", 4}},
			[]string{"t:4: containerd-1.7 pins v1.7.35, but the Go module proxy has v1.7.36 (newest v1.7.36: served when asked by name, not listed)"}},
		{"containerd", []runtimeLine{{"containerd-1.6", "v1.6.36", 3}},
			[]string{"t:3: containerd-1.6 pins v1.6.36, but the Go module proxy has v1.6.37, v1.6.38 (newest v1.6.38: served when asked by name, not listed)"}},
		{"containerd", []runtimeLine{{"containerd-1.7", "v1.7.33", 4}},
			[]string{"t:4: containerd-1.7 pins v1.7.33, which the Go module proxy (github.com/containerd/containerd) neither lists nor serves when asked"}},
		{"crio", []runtimeLine{{"crio-1.35", "v1.35.2", 1}, {"crio-1.36", "v1.36.3", 2}},
			[]string{"t:2: crio-1.36 pins v1.36.3, but the Go module proxy has v1.36.5 (newest v1.36.5: served when asked by name, not listed)"}},
		{"containerd", []runtimeLine{{"containerd-1.6", "v1.6.38", 3}, {"containerd-1.7", "v1.7.36", 4}}, nil},
	} {
		got, err := staleLines(context.Background(), src, mods[c.family], "t", c.lines)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%v:\n got  %q\n want %q", c.lines, got, c.want)
		}
	}
}

// The tables against the real proxy (GOPROXY, as go env reads it).
func TestRuntimeTablesPinTheNewestTagOfEachLine(t *testing.T) {
	if os.Getenv(liveCheckEnv) == "" {
		t.Skipf("asks the Go module proxy: set %s=1 (make lint does)", liveCheckEnv)
	}
	ctx := context.Background()
	src, err := modproxy.FromGoEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mods := familyModules(t)
	for _, family := range families {
		table := "hack/" + family + "-lines.txt"
		stale, err := staleLines(ctx, src, mods[family], table, tableLines(t, family))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stale {
			t.Error(s)
		}
	}
}
