package selfvalidation_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/crio"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
)

var _ = Describe("A CRI-O build that is none of the named runtimes", Label("any-build"), func() {
	// A vendor's CRI-O in a dir of its own: crio-1.34's crio and pinns
	// copied elsewhere, so nothing but the path tells the harness what it
	// is. The config-fault scenarios and the control (a restart among
	// them) must come to crio-1.34's pinned verdicts, and the report must
	// name the build by its dir and the version its crio says.
	It("is brought up from its bin dir, named by its crio --version, and judged as its line", func(ctx SpecContext) {
		l, ok := crio.LineOf(crio.Crio134)
		Expect(ok).To(BeTrue())
		dir := GinkgoT().TempDir()
		src := crio.CachedBinDir(runtimes.DefaultCacheDir(), l.Version)
		for _, b := range []string{"crio", "pinns"} {
			raw, err := os.ReadFile(filepath.Join(src, b))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(dir, b), raw, 0o755)).To(Succeed())
		}
		r := runGatedOn(ctx, dir, "any-build-crio", "-ginkgo.label-filter=fault:config || control")
		Expect(r.Report).NotTo(BeNil(), "the run did not get to verdicts:\n%s", r.Output)
		Expect(r.Report.Runtime.Managed).To(Equal("crio@" + dir))
		Expect(r.Report.Runtime.Name).To(Equal("cri-o"))
		Expect(r.Report.Runtime.Version).To(Equal("1.34.0"))
		Expect(r.Report.Runtime.Details).To(HaveKeyWithValue("crio_version", "1.34.0"))
		var ran []string
		for _, s := range r.Report.Scenarios {
			if s.Verdict == report.Skipped && s.Reason == "" {
				continue // left out by the label filter
			}
			ran = append(ran, s.ID)
			want, ok := expected[crio.Crio134][s.ID]
			Expect(ok).To(BeTrue(), s.ID)
			expectSignature(&s, want, "on a CRI-O build run by dir")
		}
		Expect(ran).To(ConsistOf("healthy-network", "hostnetwork-no-cni-config", "late-cni-config", "malformed-cni-config",
			"missing-plugin-binary", "no-cni-config", "userns-no-cni-config"), r.Output)
		Expect(r.ExitCode).To(Equal(report.ExitPass), r.Output)
	}, SpecTimeout(suiteRunTimeout))

	It("refuses a dir holding neither runtime's build in one line, before anything starts", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "crio"), nil, 0o755)).To(Succeed())
		r := runGatedOn(ctx, dir, "any-build-none")
		Expect(r.ExitCode).To(Equal(report.ExitHarness), r.Output)
		Expect(r.Output).To(Equal("cnifault: " + dir + " holds no runtime build: want a containerd bin dir (containerd, containerd-shim-runc-v2, ctr) or a CRI-O bin dir (crio, pinns)\n"))
	}, SpecTimeout(suiteRunTimeout))
})
