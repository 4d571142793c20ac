package selfvalidation_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// docs/scenarios.md is generated (make docs, cnifault docs) from the
// catalog and the expectations file, as Kubernetes generates its
// conformance list: make test fails where it is stale, so that a scenario
// added, changed or re-pinned is documented with the change.
var _ = Describe("docs/scenarios.md", Label("docs"), func() {
	It("is what cnifault docs generates from the catalog and hack/known-failures.yaml, with an entry for every scenario", func(ctx SpecContext) {
		// From the repo root, as make docs runs it (the file is named as given).
		generated, err := harnessCommand(ctx, "docs", "--known-failures", "hack/known-failures.yaml").Output()
		Expect(err).NotTo(HaveOccurred())
		file, err := os.ReadFile(filepath.Join(repoRoot, "docs", "scenarios.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(file)).To(Equal(string(generated)), "docs/scenarios.md is stale: run make docs")

		list, err := harnessCommand(ctx, "list").Output()
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSpace(string(list)), "\n")[1:]
		Expect(lines).NotTo(BeEmpty())
		for _, l := range lines {
			id := strings.Fields(l)[0]
			Expect(string(file)).To(ContainSubstring("\n## "+id+"\n"), "docs/scenarios.md has no entry for %s", id)
		}
	})
})
