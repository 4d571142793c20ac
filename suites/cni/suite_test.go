// Package cni_test is the CNI fault conformance suite: every failed
// RunPodSandbox must leave zero sandboxes, zero network namespaces and no
// other leaked resource.
//
// Run it through `make e2e` or the compiled binary; the flags below are its
// interface.
package cni_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/formatter"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/cli"
	"github.com/cnifault/cnifault/fixtures/external"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// runtimeStartTimeout bounds the suite's BeforeSuite. That node is declared
// before the flags name the runtime, so it takes the longest start of any
// runtime; the margin covers what bring-up does besides the adapter's own
// start: the stale-instance sweep, the version probe, the report entries.
var runtimeStartTimeout = max(runtimes.StartTimeout, external.Bounds.Start) + 30*time.Second

// Node timeouts that derive from the bounds of the runtime under test:
// setRuntimeTimeouts sets them once the flags name it, before the spec tree
// is built (PreviewSpecs, RunSpecs), where every node but BeforeSuite reads
// them.
var (
	// runtimeTeardownTimeout bounds the runtime's teardown.
	runtimeTeardownTimeout time.Duration
	// runtimeRecoverTimeout bounds killing and restarting the runtime.
	runtimeRecoverTimeout time.Duration
	// scenarioSetupTimeout bounds a scenario's setup: baseline, config
	// install, and the wait for the runtime to take the config up
	// (networkWaitBound).
	scenarioSetupTimeout time.Duration
	// scenarioRestoreTimeout bounds returning the instance to a clean state
	// (restore), which takes up a config as the setup does; restore gives
	// its own steps restoreMargin less, so that it ends before its node
	// times out.
	scenarioRestoreTimeout time.Duration
)

// setRuntimeTimeouts derives the node timeouts above from the bounds of the
// runtime the flags name (an external endpoint has its own).
func setRuntimeTimeouts() {
	b := external.Bounds
	if tc.Endpoint == "" {
		var err error
		if b, err = runtimes.BoundsOf(tc.RuntimeName()); err != nil {
			// An unknown name, or a dir holding no runtime build: the
			// preflight after the catalog refuses it in one line, and no
			// spec runs to need a timeout.
			return
		}
	}
	runtimeTeardownTimeout = b.Teardown
	runtimeRecoverTimeout = b.Restart
	scenarioSetupTimeout = scenarioSetupBase + networkWaitBound
	scenarioRestoreTimeout = scenarioRestoreBase + networkWaitBound + restoreMargin
}

// tc is the run's configuration: cnifault's flags, checked as a whole by
// TestMain before the suite starts.
var tc cli.TestContext

func init() { tc.RegisterFlags(flag.CommandLine) }

// rt is the runtime under test in this process (named so as not to shadow
// the standard library's runtime); runID is shared by every name this run
// creates on the node.
var (
	rt    runtimes.Runtime
	runID string
	// subnetOctet is the process's scenario subnet, claimed for the run
	// (scn.ClaimSubnet).
	subnetOctet int
	// exitCode is decided by the report, not by Ginkgo's pass/fail.
	exitCode = report.ExitHarness
)

func init() {
	// `make e2e` sent SIGTERM dies without passing it on: ask the kernel to
	// tell us instead, so Ginkgo's interrupt handling tears the runtime
	// down. The kernel sends the death signal each time it reparents this
	// process, and a parent with threads (a Go program: a parallel run,
	// cnifault matrix) reparents it through each thread as they exit: a
	// second SIGTERM would make Ginkgo skip the teardown. So the death
	// signal is one of our own, the first of which becomes one SIGTERM.
	// init runs on the main thread, which the setting needs.
	deaths := make(chan os.Signal, 1)
	signal.Notify(deaths, parentDeathSignal)
	go func() {
		<-deaths
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}()
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeathSignal), 0, 0, 0)
}

// parentDeathSignal tells this process its parent died (PR_SET_PDEATHSIG).
const parentDeathSignal = unix.SIGUSR2

// TestMain is cnifault's entry: the CLI runs commands and checks
// the input; only a run that may start reaches the specs.
func TestMain(m *testing.M) {
	os.Exit(cli.Main(os.Args[1:], flag.CommandLine, &tc, cli.Suite{
		// The node timeouts derive from the runtime the flags name, and
		// the spec tree (the catalog's preview, then RunSpecs) reads them.
		Catalog: func() []cli.Entry {
			setRuntimeTimeouts()
			return previewCatalog()
		},
		Root:         os.Geteuid() == 0,
		WritesReport: func() bool { return GinkgoParallelProcess() == 1 },
		Run: func() int {
			_, rc := GinkgoConfiguration()
			if quietFramework = cli.QuietFramework(stdout, rc.Verbose || rc.VeryVerbose); quietFramework {
				// The Go test binary's own verdict lines (--- FAIL:
				// TestCNIFault, PASS, FAIL) go nowhere; cnifault's lines
				// keep the real stdout.
				if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
					os.Stdout = null
					defer func() { os.Stdout = stdout; null.Close() }()
				}
			}
			m.Run()
			return exitCode
		},
	}, stdout, os.Stderr))
}

// stdout is the process's stdout, where cnifault's own lines go; Run
// hides the test framework's behind it where quietFramework says.
var stdout = os.Stdout

// quietFramework: stdout is no live terminal and no Ginkgo narration was
// asked for, so Ginkgo's reporter prints nothing there (cli.QuietFramework).
var quietFramework bool

// previewing is set while Ginkgo walks the spec tree without running it:
// the reporting nodes then have nothing to report.
var previewing bool

// previewCatalog walks the spec tree without running anything (Ginkgo's
// preview) and returns the catalog: every scenario with its labels, what it
// injects (its When), what it asserts (its It) and the kubelet behaviour
// it models.
func previewCatalog() []cli.Entry {
	previewing = true
	defer func() { previewing = false }()
	var out []cli.Entry
	suite, _ := suiteConfig()
	for _, s := range PreviewSpecs("cnifault", suite).SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		id := verdict.ScenarioID(s.Labels())
		if id == "" {
			continue
		}
		out = append(out, cli.Entry{ID: id, Labels: verdict.OtherLabels(s.Labels()),
			Description: strings.TrimPrefix(s.ContainerHierarchyTexts[len(s.ContainerHierarchyTexts)-1], "when "),
			Asserts:     s.LeafNodeText, Kubelet: kubeletModel(s.Labels()),
			// The preview marks what the filters leave out skipped.
			Selected: !s.State.Is(types.SpecStateSkipped | types.SpecStatePending)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

func TestCNIFault(t *testing.T) {
	RegisterFailHandler(Fail)
	suite, reporter := suiteConfig()
	if suite.Timeout == time.Hour { // Ginkgo's default: far too long for a CI gate
		suite.Timeout = 20 * time.Minute
	}
	if !cli.Live(stdout) {
		reporter.NoColor = true
	}
	if quietFramework {
		formatter.ColorableStdOut = io.Discard
	}
	registerProgress()
	RunSpecs(t, "cnifault", suite, reporter)
}

// suiteConfig is Ginkgo's configuration for the run: in kubelet mode only
// the scenarios it covers (label kubelet-mode) are selected, within any
// filter the command line gave.
func suiteConfig() (types.SuiteConfig, types.ReporterConfig) {
	suite, reporter := GinkgoConfiguration()
	if tc.Kubelet {
		if suite.LabelFilter == "" {
			suite.LabelFilter = report.LabelKubeletMode
		} else {
			suite.LabelFilter = "(" + suite.LabelFilter + ") && " + report.LabelKubeletMode
		}
	}
	return suite, reporter
}

// process is this process's number among the run's: a parallel run's
// (--procs), or Ginkgo's where its CLI runs processes. The instance, the
// bridge and the subnet carry it.
func process() int {
	if n := tc.Process(); n > 0 {
		return n
	}
	return GinkgoParallelProcess()
}

var _ = BeforeSuite(func(ctx SpecContext) {
	runID = scn.NewRunID()

	instance := fmt.Sprintf("%s-p%d", runID, process())
	// Claimed first, so given up last: after the instance's teardown has
	// removed every pod in the subnet.
	subnet, err := scn.ClaimSubnet(runID, process())
	Expect(err).NotTo(HaveOccurred(), "claiming a scenario subnet")
	DeferCleanup(subnet.Release)
	subnetOctet = subnet.N()
	bringUp := time.Now()
	sweepKilledKubelets(ctx)
	if tc.Endpoint != "" {
		By("checking the runtime at " + tc.Endpoint)
		rt, err = external.Start(ctx, external.Options{
			Endpoint:     tc.Endpoint,
			CNIConfDir:   tc.CNIConfDir,
			CNIBinDir:    tc.CNIBinDir,
			NetNSDir:     tc.NetNSDir,
			SandboxImage: tc.SandboxImage,
			RuntimeLog:   tc.RuntimeLog,
			FaultPlugin:  absPath(tc.FaultPlugin),
			WorkDir:      absPath(filepath.Join(tc.WorkDir, "external-"+instance)),
			RunID:        runID,
			CgroupParent: path.Join(tc.CgroupRoot, "cnifault-"+instance),
			Log:          GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred(), "the external runtime at %s", tc.Endpoint)
	} else {
		name := tc.RuntimeName()
		By("bringing up " + name)
		rt, err = startManaged(ctx, instance)
		Expect(err).NotTo(HaveOccurred(), "bringing up %s", name)
	}
	DeferCleanup(func(ctx SpecContext) {
		Expect(rt.Teardown(ctx)).To(Succeed())
	}, NodeTimeout(runtimeTeardownTimeout))

	v, err := rt.CRI().Version(ctx)
	Expect(err).NotTo(HaveOccurred())
	managed := rt.Name()
	if _, ok := rt.(runtimes.Controllable); !ok {
		managed = ""
	}
	AddReportEntry(runtimeEntry, report.Runtime{
		Name:       v.GetRuntimeName(),
		Version:    v.GetRuntimeVersion(),
		CRIVersion: v.GetRuntimeApiVersion(),
		Endpoint:   rt.Endpoint(),
		Managed:    managed,
		Details:    rt.Details(),
		// Measured, for the benchmark: never asserted on.
		BringUpSeconds: time.Since(bringUp).Round(time.Millisecond).Seconds(),
	}, ReportEntryVisibilityNever)
	// Read now: teardown removes an instance's bin dir.
	AddReportEntry(pluginsEntry, report.PluginVersions(rt.CNIBinDir(),
		"bridge", "host-local", "loopback", "portmap", cniconf.FaultPluginType), ReportEntryVisibilityNever)
}, NodeTimeout(runtimeStartTimeout))

// startManaged brings up the managed runtime the flags name as instance.
func startManaged(ctx context.Context, instance string) (runtimes.Runtime, error) {
	name := tc.RuntimeName()
	return runtimes.Start(ctx, runtimes.Options{
		Runtime:      name,
		CacheDir:     tc.CacheDir,
		WorkDir:      absPath(filepath.Join(tc.WorkDir, filepath.Base(name)+"-"+instance)),
		StateDir:     filepath.Join(tc.StateRoot, instance),
		CNIPluginDir: absPath(tc.CNIPluginDir),
		ExtraPlugins: []string{absPath(tc.FaultPlugin)},
		PauseBinary:  absPath(tc.PauseBinary),
		RuncWrapper:  absPath(tc.RuncWrapper),
		NRIPlugin:    nriPlugin(),
		SandboxImage: tc.TestSandboxImage,
		CgroupRoot:   tc.CgroupRoot,
		Log:          GinkgoWriter,
	})
}

// replacements counts the instances that replaced one a scenario left
// unable to start (replaceDeadRuntime).
var replacements int

// replaceDeadRuntime gives the rest of the run a working runtime after a
// scenario left the managed one unable to start again (a crash loop is
// that scenario's verdict, not every later one's): it tears the dead
// instance down, as the sweep of a killed run's instance does, and brings
// up a fresh one in its place under new dirs.
func replaceDeadRuntime(ctx SpecContext) {
	ctl, ok := rt.(runtimes.Controllable)
	if !ok || ctl.Running() {
		return
	}
	GinkgoWriter.Printf("%s is down and does not start again: replacing its instance for the rest of the run\n", rt.Name())
	Expect(rt.Teardown(ctx)).To(Succeed(), "tearing down the instance that does not start again")
	replacements++
	next, err := startManaged(ctx, fmt.Sprintf("%s-p%d-r%d", runID, process(), replacements))
	Expect(err).NotTo(HaveOccurred(), "bringing up a replacement instance")
	rt = next
	runScope = nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// nriPlugin is cmd/cnifault-nri as a managed runtime launches it, with its
// config pointing at the instance's NRI dir.
func nriPlugin() *runtimes.NRIPlugin {
	return &runtimes.NRIPlugin{Binary: absPath(tc.NRIPlugin), File: cniconf.NRIPluginFile(),
		Config: func(dir string) ([]byte, error) { return json.Marshal(cniconf.NRIFiles(dir)) }}
}
