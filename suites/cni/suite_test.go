// Package cni_test is the CNI fault conformance suite: every failed
// RunPodSandbox must leave zero sandboxes, zero network namespaces and no
// other leaked resource.
//
// Run it through `make e2e` or the compiled binary; the flags below are its
// interface.
package cni_test

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

// Timeouts of suite-level nodes.
const (
	runtimeStartTimeout    = containerd.StartTimeout + 30*time.Second
	runtimeTeardownTimeout = containerd.TeardownTimeout + 3*containerd.StopGrace
)

var (
	flagRuntime       = flag.String("runtime", containerd.Default, "managed runtime ("+strings.Join(runtimes.Managed(), ", ")+") or a dir holding a containerd build")
	flagReportDir     = flag.String("report-dir", "", "write junit.xml, report.json and artifacts here")
	flagWorkDir       = flag.String("work-dir", "_output/work", "instance work dirs (runtime root, logs, CNI dirs) go under here")
	flagStateRoot     = flag.String("state-root", "/run/cnifault", "instance state dirs (sockets, netns mounts) go under here; keep it short")
	flagCacheDir      = flag.String("cache-dir", containerd.DefaultCacheDir(), "where hack/deps.sh caches built runtimes")
	flagCNIPluginDir  = flag.String("cni-plugin-dir", "_output/cni/bin", "reference CNI plugins built by hack/deps.sh")
	flagPauseBinary   = flag.String("pause-binary", "_output/bin/cnifault-pause", "static pause binary for the sandbox image")
	flagFaultPlugin   = flag.String("fault-plugin", "_output/bin/cni-fault", "the cni-fault plugin binary")
	flagRuncWrapper   = flag.String("runc-wrapper", "_output/bin/cnifault-runc-wrapper", "runc stand-in for hosts that refuse what a runtime asks of runc (used only where a probe shows the need)")
	flagKnownFailures = flag.String("known-failures", "", "YAML file of known failures: listed failures become xfail (exit 0), listed passes xpass")
	flagContainerd    = flag.String("containerd-bin-dir", "", "a dir holding a containerd build (containerd, containerd-shim-runc-v2, ctr) to bring up instead of --runtime")

	// External endpoint mode: a runtime already running on the node.
	flagEndpoint     = flag.String("runtime-endpoint", "", "test the runtime already serving this CRI endpoint (unix://…) instead of a managed one")
	flagCNIConfDir   = flag.String("cni-conf-dir", "", "external mode: the runtime's CNI config dir")
	flagCNIBinDir    = flag.String("cni-bin-dir", "", "external mode: the runtime's CNI plugin dir")
	flagNetNSDir     = flag.String("netns-dir", "", "external mode: where the runtime mounts pod netns (default: asked from the runtime)")
	flagSandboxImage = flag.String("sandbox-image", "", "external mode: the runtime's sandbox image (default: asked from the runtime)")
)

// runtime is the instance under test in this process; runID is shared by
// every name this run creates on the node.
var (
	runtime runtimes.Runtime
	runID   string
	// exitCode is decided by the report, not by Ginkgo's pass/fail.
	exitCode = report.ExitHarness
)

func init() {
	// `make e2e` sent SIGTERM dies without passing it on: ask the kernel to
	// deliver it to us instead, so Ginkgo's interrupt handling tears the
	// runtime down. init runs on the main thread, which the setting needs.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0)
}

func TestMain(m *testing.M) {
	if handled, code := runCommand(os.Args[1:], os.Stdout, os.Stderr); handled {
		os.Exit(code)
	}
	if len(os.Args) > 1 && os.Args[1] == "list" {
		os.Exit(list(m))
	}
	flag.Parse()
	if err := lockReportDir(*flagReportDir); err != nil {
		fmt.Fprintf(os.Stderr, "cnifault: %v\n", err)
		os.Exit(report.ExitHarness)
	}
	m.Run()
	os.Exit(exitCode)
}

// list walks the spec tree without running anything (Ginkgo's dry run) and
// prints the catalog.
func list(m *testing.M) int {
	listMode = true
	os.Args = []string{os.Args[0], "-ginkgo.dry-run", "-ginkgo.no-color"}
	flag.Parse()
	// Ginkgo's reporter holds on to fd 1: silence the dry run at fd level.
	saved, err := unix.Dup(1)
	if err != nil {
		return report.ExitHarness
	}
	if devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = unix.Dup2(int(devnull.Fd()), 1)
	}
	m.Run()
	_ = unix.Dup2(saved, 1)
	printList(os.Stdout)
	return report.ExitPass
}

func TestCNIFault(t *testing.T) {
	RegisterFailHandler(Fail)
	suite, reporter := GinkgoConfiguration()
	if suite.Timeout == time.Hour { // Ginkgo's default: far too long for a CI gate
		suite.Timeout = 20 * time.Minute
	}
	RunSpecs(t, "cnifault", suite, reporter)
}

var _ = BeforeSuite(func(ctx SpecContext) {
	Expect(os.Geteuid()).To(BeZero(), "cnifault runs containerd, mounts netns and creates links: run it as root")
	runID = newRunID()

	instance := fmt.Sprintf("%s-p%d", runID, GinkgoParallelProcess())
	var err error
	if *flagEndpoint != "" {
		By("checking the runtime at " + *flagEndpoint)
		runtime, err = runtimes.StartExternal(ctx, runtimes.ExternalOptions{
			Endpoint:     *flagEndpoint,
			CNIConfDir:   *flagCNIConfDir,
			CNIBinDir:    *flagCNIBinDir,
			NetNSDir:     *flagNetNSDir,
			SandboxImage: *flagSandboxImage,
			FaultPlugin:  absPath(*flagFaultPlugin),
			WorkDir:      absPath(filepath.Join(*flagWorkDir, "external-"+instance)),
			RunID:        runID,
			CgroupParent: "/cnifault-" + instance,
			Log:          GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred(), "the external runtime at %s", *flagEndpoint)
	} else {
		name := *flagRuntime
		if *flagContainerd != "" {
			name = *flagContainerd
		}
		By("bringing up " + name)
		runtime, err = runtimes.Start(ctx, runtimes.Options{
			Runtime:      name,
			CacheDir:     *flagCacheDir,
			WorkDir:      absPath(filepath.Join(*flagWorkDir, filepath.Base(name)+"-"+instance)),
			StateDir:     filepath.Join(*flagStateRoot, instance),
			CNIPluginDir: absPath(*flagCNIPluginDir),
			ExtraPlugins: []string{absPath(*flagFaultPlugin)},
			PauseBinary:  absPath(*flagPauseBinary),
			RuncWrapper:  absPath(*flagRuncWrapper),
			Log:          GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred(), "bringing up %s", name)
	}
	DeferCleanup(func(ctx SpecContext) {
		Expect(runtime.Teardown(ctx)).To(Succeed())
	}, NodeTimeout(runtimeTeardownTimeout))

	v, err := runtime.CRI().Version(ctx)
	Expect(err).NotTo(HaveOccurred())
	managed := runtime.Name()
	if _, ok := runtime.(runtimes.Controllable); !ok {
		managed = ""
	}
	AddReportEntry(runtimeEntry, report.Runtime{
		Name:       v.GetRuntimeName(),
		Version:    v.GetRuntimeVersion(),
		CRIVersion: v.GetRuntimeApiVersion(),
		Endpoint:   runtime.Endpoint(),
		Managed:    managed,
		Details:    runtime.Details(),
	}, ReportEntryVisibilityNever)
	// Read now: teardown removes an instance's bin dir.
	AddReportEntry(pluginsEntry, report.PluginVersions(runtime.CNIBinDir(),
		"bridge", "host-local", "loopback", "portmap", cniconf.FaultPluginType), ReportEntryVisibilityNever)
}, NodeTimeout(runtimeStartTimeout))

func newRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
