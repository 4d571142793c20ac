package selfvalidation_test

import (
	"errors"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/fixtures/report"
)

// A real bisect on two cached managed lines: the search itself is proven
// root-free in fixtures/bisect; here the whole chain — served tags, the
// shared builder's cache, a child run per tag, its report — runs on the
// node. The two ends agree, so nothing between them may be built or run
// (docs/bisect.md shows a bisect that finds a fix, which needs uncached tags).
var _ = Describe("cnifault bisect", Label("bisect"), func() {
	When("both ends of the range behave alike", func() {
		It("runs the scenario on the two ends only and says there was no change", func(ctx SpecContext) {
			reportDir := filepath.Join(repoRoot, "_output", "reports", "bisect")
			cmd := harnessCommand(ctx, append([]string{"bisect", "--scenario", "runtime-killed-mid-add",
				"--good", "v2.3.7", "--bad", "v2.4.2", "--report-dir", reportDir},
				runFlags(filepath.Join(repoRoot, "_output", "work"))...)...)
			out, err := cmd.CombinedOutput()
			GinkgoWriter.Printf("%s\n", out)
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				Fail(string(out))
			}
			Expect(err).NotTo(HaveOccurred())
			Expect(string(out)).To(ContainSubstring("[bisect] building v2.3.7 (cached)"))
			Expect(string(out)).To(ContainSubstring("[bisect] v2.3.7: pass"))
			Expect(string(out)).To(ContainSubstring("[bisect] v2.4.2: pass"))
			Expect(string(out)).To(ContainSubstring("[bisect] no change between v2.3.7 (good) and v2.4.2 (bad): runtime-killed-mid-add is pass on both"))
			Expect(string(out)).NotTo(ContainSubstring("v2.4.0"))
			r, err := report.Read(filepath.Join(reportDir, "v2.4.2", "report.json"))
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Scenario("runtime-killed-mid-add")).NotTo(BeNil())
			Expect(r.Scenario("runtime-killed-mid-add").Verdict).To(Equal(report.Pass))
		}, SpecTimeout(suiteRunTimeout))
	})
})
