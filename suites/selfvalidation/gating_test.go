package selfvalidation_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/containerd"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/verdict"
)

// partialOnly keeps gating runs short: the partial-ADD scenarios (two fail
// on containerd 2.4) and the control (passes).
const partialOnly = "-ginkgo.label-filter=fault:partial || control"

// runGated runs a subset of the suite on containerd 2.4 with extra flags
// and reads its report.
func runGated(ctx context.Context, name string, extra ...string) run {
	GinkgoHelper()
	return runGatedOn(ctx, "containerd-2.4", name, extra...)
}

// runGatedOn is runGated on runtime ("" for none, when extra names a bin
// dir). A run refused before it starts (exit 2) has no report; its Report
// is nil.
func runGatedOn(ctx context.Context, runtime, name string, extra ...string) run {
	GinkgoHelper()
	reportDir := filepath.Join(repoRoot, "_output", "reports", name)
	Expect(os.RemoveAll(reportDir)).To(Succeed())
	cmd := suiteCommand(ctx, runtime, reportDir, filepath.Join(repoRoot, "_output", "work-"+name), extra...)
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("%s\n", out)
	r := run{Output: string(out)}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.ExitCode = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	if r.ExitCode == report.ExitHarness {
		return r
	}
	r.Report, err = report.Read(filepath.Join(reportDir, "report.json"))
	Expect(err).NotTo(HaveOccurred(), string(out))
	return r
}

// knownFailures writes a known-failures file for the test.
func knownFailures(content string) string {
	GinkgoHelper()
	p := filepath.Join(GinkgoT().TempDir(), "known-failures.yaml")
	Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	return p
}

var _ = Describe("A CI gate with known failures", Label("gating"), func() {
	When("every failure is listed with the signature it has", func() {
		It("reports xfail and exits 0", func(ctx SpecContext) {
			r := runGated(ctx, "gating-all-known", "--known-failures", filepath.Join(repoRoot, "hack", "known-failures.yaml"), partialOnly)
			Expect(r.ExitCode).To(Equal(report.ExitPass), r.Output)
			Expect(r.Report.Scenario("partial-add-del-fails").Verdict).To(Equal(report.XFail))
			Expect(r.Report.Scenario("partial-add-del-fails").KnownFailure).NotTo(BeNil())
			Expect(r.Report.Scenario("partial-add-del-fails-once").Verdict).To(Equal(report.XFail))
			Expect(r.Report.Scenario("partial-add").Verdict).To(Equal(report.Pass))
		}, SpecTimeout(suiteRunTimeout))
	})

	When("a listed failure fails differently, or a listed pass fails", func() {
		It("exits 1 with one line naming what changed", func(ctx SpecContext) {
			list := knownFailures(`
- scenario: partial-add-del-fails
  runtime: containerd
  versions: ">=2.0.0 <2.5.0"
  leaks: [ip, netns]
  reclaim: stuck
  reason: a signature that is not the runtime's
- scenario: partial-add-del-fails-once
  runtime: containerd-2.4
  leaks: [ip]
  reclaim: stuck
  reason: containerd issue 12130
- scenario: healthy-network
  runtime: containerd-2.4
  leaks: [ip]
  reclaim: stuck
  reason: listed by mistake
`)
			r := runGated(ctx, "gating-changed", "--known-failures", list, partialOnly)
			Expect(r.ExitCode).To(Equal(report.ExitFail), r.Output)
			Expect(r.Report.Scenario("partial-add-del-fails").Verdict).To(Equal(report.Fail))
			Expect(r.Output).To(ContainSubstring("known failure changed: partial-add-del-fails on containerd v2.4.2"))
			Expect(r.Output).To(ContainSubstring("leaks ip, netns became ip 1"))
			Expect(r.Report.Scenario("partial-add-del-fails-once").Verdict).To(Equal(report.XFail))
			Expect(r.Report.Scenario("healthy-network").Verdict).To(Equal(report.XPass))
			Expect(r.Report.Scenario("healthy-network").ExpectationChanged).To(ContainSubstring("became pass"))
		}, SpecTimeout(suiteRunTimeout))
	})

	When("a failure is not listed, or its version range does not match", func() {
		It("still fails the run", func(ctx SpecContext) {
			list := knownFailures(`
- scenario: partial-add-del-fails
  runtime: containerd
  versions: ">=2.0.0 <2.5.0"
  leaks: [ip]
  reclaim: stuck
  reason: containerd issue 12130
- scenario: partial-add-del-fails-once
  runtime: containerd
  versions: ">=1.0.0 <2.0.0"
  leaks: [ip]
  reclaim: stuck
  reason: only old versions
`)
			r := runGated(ctx, "gating-unlisted", "--known-failures", list, partialOnly)
			Expect(r.ExitCode).To(Equal(report.ExitFail), r.Output)
			Expect(r.Report.Scenario("partial-add-del-fails").Verdict).To(Equal(report.XFail))
			Expect(r.Report.Scenario("partial-add-del-fails-once").Verdict).To(Equal(report.Fail))
		}, SpecTimeout(suiteRunTimeout))
	})

	When("the filters select no scenario", func() {
		It("exits 2, saying so, before any runtime starts", func(ctx SpecContext) {
			r := runGated(ctx, "gating-none", "-ginkgo.label-filter=scenario:no-such-scenario")
			Expect(r.ExitCode).To(Equal(report.ExitHarness), r.Output)
			Expect(r.Output).To(ContainSubstring("HARNESS ERROR: " + verdict.NothingSelected))
			Expect(r.Output).NotTo(ContainSubstring("unix://"), "a runtime was brought up for nothing")
		}, SpecTimeout(suiteRunTimeout))
	})

	When("the known-failures file is invalid or an entry never expires", func() {
		It("exits 2 before anything runs: the gate cannot be trusted", func(ctx SpecContext) {
			for name, tc := range map[string]struct{ list, says string }{
				"typo":       {"- scenario: partial-add\n  resaon: typo\n", "resaon"},
				"open-ended": {"- scenario: partial-add\n  runtime: containerd\n  versions: '>=2.0.0'\n  leaks: []\n  reason: r\n", "bound its versions at both ends"},
			} {
				r := runGated(ctx, "gating-invalid-"+name, "--known-failures", knownFailures(tc.list), "-ginkgo.label-filter=control")
				Expect(r.ExitCode).To(Equal(report.ExitHarness), r.Output)
				// Refused before anything ran: one line naming the mistake.
				Expect(r.Output).To(MatchRegexp(`(?m)^cnifault: .*`+tc.says), r.Output)
				Expect(r.Output).NotTo(ContainSubstring("Will run"))
			}
		}, SpecTimeout(suiteRunTimeout))
	})
})

// gateRecorded runs `cnifault gate` with the project's expectations on the
// recorded containerd-2.4 report (fixtures/report/testdata/managed),
// changed by change, and returns its exit status and output.
func gateRecorded(ctx context.Context, change func(r *report.Report)) (int, string) {
	GinkgoHelper()
	r, err := report.Read(filepath.Join(repoRoot, "fixtures", "report", "testdata", "managed", "containerd-2.4.report.json"))
	Expect(err).NotTo(HaveOccurred())
	change(r)
	dir := GinkgoT().TempDir()
	_, err = r.WriteAll(dir)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, suiteBinary(), "gate", "--known-failures", filepath.Join(repoRoot, "hack", "known-failures.yaml"),
		filepath.Join(dir, "report.json"))
	return combinedExit(cmd)
}

var _ = Describe("The gate on a recorded report", Label("gating"), func() {
	It("exits 0 where every signature holds", func(ctx SpecContext) {
		code, out := gateRecorded(ctx, func(*report.Report) {})
		Expect(code).To(Equal(report.ExitPass), out)
	}, SpecTimeout(time.Minute))

	It("exits 1 where a known failure's signature changed, saying what changed", func(ctx SpecContext) {
		code, out := gateRecorded(ctx, func(r *report.Report) {
			s := r.Scenario("partial-add-del-fails")
			s.Leaks = append(s.Leaks, report.Leak{Kind: "netns", ID: "/run/netns/x"}, report.Leak{Kind: "sandbox", ID: "0123456789abcdef"})
		})
		Expect(code).To(Equal(report.ExitFail), out)
		Expect(out).To(ContainSubstring("known failure changed: partial-add-del-fails on containerd 2.4.2+unknown: leaks ip 1 became ip 1, netns 1, sandbox 1"))
	}, SpecTimeout(time.Minute))

	It("exits 1 where a known failure leaked more of a kind than its entry counts, naming the count", func(ctx SpecContext) {
		code, out := gateRecorded(ctx, func(r *report.Report) {
			s := r.Scenario("partial-add-del-fails")
			s.Leaks = append(s.Leaks, report.Leak{Kind: "ip", ID: "10.250.7.3"}, report.Leak{Kind: "ip", ID: "10.250.7.4"})
		})
		Expect(code).To(Equal(report.ExitFail), out)
		Expect(out).To(ContainSubstring("known failure changed: partial-add-del-fails on containerd 2.4.2+unknown: leaks ip 1 became ip 3"))
	}, SpecTimeout(time.Minute))

	It("exits 1 on a skip the file does not list, naming the scenario and the run's reason", func(ctx SpecContext) {
		code, out := gateRecorded(ctx, func(r *report.Report) {
			s := r.Scenario("status-recovers")
			s.Verdict, s.Reason = report.Skipped, "the runtime did not invoke CNI STATUS"
		})
		Expect(code).To(Equal(report.ExitFail), out)
		Expect(out).To(ContainSubstring("unlisted skip: status-recovers on containerd 2.4.2+unknown: the runtime did not invoke CNI STATUS"))
	}, SpecTimeout(time.Minute))
})

var _ = Describe("A containerd build that is none of the named runtimes", Label("any-build"), func() {
	// A vendor's build in a dir of its own: a managed line's binaries
	// copied elsewhere, so nothing but the path tells the harness. One line
	// per config schema its `config default` prints (2, 3, 4): the whole
	// catalog must come to the verdicts pinned for that line.
	DescribeTable("is brought up from its bin dir, its config derived from the binary, and judged as its line",
		func(ctx SpecContext, line, version, schema string) {
			l, ok := containerd.LineOf(line)
			Expect(ok).To(BeTrue())
			dir := GinkgoT().TempDir()
			src := containerd.CachedBinDir(containerd.DefaultCacheDir(), l.Version)
			for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
				raw, err := os.ReadFile(filepath.Join(src, b))
				Expect(err).NotTo(HaveOccurred())
				Expect(os.WriteFile(filepath.Join(dir, b), raw, 0o755)).To(Succeed())
			}
			r := runGatedOn(ctx, "", "any-build-"+line, "--containerd-bin-dir", dir)
			Expect(r.Report).NotTo(BeNil(), "the run did not get to verdicts:\n%s", r.Output)
			Expect(r.Report.Runtime.Managed).To(Equal("containerd@" + dir))
			Expect(r.Report.Runtime.Version).To(Equal(version))
			Expect(r.Report.Runtime.Details).To(HaveKeyWithValue("config_version", schema))
			Expect(r.Report.Scenarios).To(HaveLen(len(expected[line])), r.Output)
			for id, want := range expected[line] {
				s := r.Report.Scenario(id)
				Expect(s).NotTo(BeNil(), id)
				expectSignature(s, want, "on "+line+" by dir")
			}
			Expect(r.ExitCode).To(Equal(report.ExitFail), r.Output)
		},
		Entry("1.7.36 (schema 2)", "containerd-1.7", "v1.7.36", "2", SpecTimeout(suiteRunTimeout)),
		Entry("2.0.14 (schema 3)", "containerd-2.0", "v2.0.14", "3", SpecTimeout(suiteRunTimeout)),
		Entry("2.4.2 (schema 4)", "containerd-2.4", "v2.4.2", "4", SpecTimeout(suiteRunTimeout)),
	)
})

// runGate runs hack/gate.sh, CI's gate command, as CI does, and returns its
// exit status and output.
func runGate(ctx context.Context, runtime, name string, extra ...string) (int, string) {
	GinkgoHelper()
	reportDir := filepath.Join(repoRoot, "_output", "reports", name)
	Expect(os.RemoveAll(reportDir)).To(Succeed())
	args := append([]string{filepath.Join(repoRoot, "hack", "gate.sh"), "--work-dir", filepath.Join(repoRoot, "_output", "work-"+name)}, extra...)
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Env = append(os.Environ(), "RUNTIME="+runtime, "REPORT_DIR="+reportDir)
	return combinedExit(cmd)
}

// combinedExit runs cmd and returns its exit status and output: a status
// of its own is an answer, anything else (it could not start) fails.
func combinedExit(cmd *exec.Cmd) (int, string) {
	GinkgoHelper()
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("%s\n", out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	Expect(err).NotTo(HaveOccurred(), string(out))
	return 0, string(out)
}

var _ = Describe("CI's gate command", Label("gating"), func() {
	When("a scenario fails", func() {
		It("exits 1, cnifault's status, not make's 2, and logs cnifault's own lines only", func(ctx SpecContext) {
			// no-cni-config fails on containerd 1.7.36 (a sandbox and a netns leak).
			code, out := runGate(ctx, "containerd-1.7", "gate-fail", "-ginkgo.label-filter=scenario:no-cni-config")
			Expect(code).To(Equal(report.ExitFail), out)
			r, err := report.Read(filepath.Join(repoRoot, "_output", "reports", "gate-fail", "report.json"))
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(r.Scenario("no-cni-config").Verdict).To(Equal(report.Fail))

			By("reading the log as CI keeps it: stdout a pipe, not a terminal")
			Expect(out).NotTo(ContainSubstring("\x1b"), "a colour or cursor code in a CI log")
			Expect(out).NotTo(ContainSubstring("\r"), "a redrawn line in a CI log")
			for _, framework := range []string{"•", "Ran 1 of", "Summarizing", "[FAIL]", "--- FAIL: TestCNIFault", "\nFAIL\n"} {
				Expect(out).NotTo(ContainSubstring(framework), "the test framework's output in a CI log")
			}
			Expect(out).To(MatchRegexp(`(?m)^FAIL +no-cni-config +[0-9.]+s +leaked: `))
			Expect(out).To(MatchRegexp(`(?m)^total [0-9.]+s, exit status 1$`))
		}, SpecTimeout(suiteRunTimeout))
	})

	When("it cannot prepare the run", func() {
		It("exits 2", func(ctx SpecContext) {
			code, out := runGate(ctx, "containerd-0.1", "gate-bad-runtime")
			Expect(code).To(Equal(report.ExitHarness), out)
			Expect(out).To(ContainSubstring("unknown runtime containerd-0.1"))
		}, SpecTimeout(suiteRunTimeout))
	})
})
