package selfvalidation_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cnifault/cnifault/fixtures/external"
	"github.com/cnifault/cnifault/fixtures/host"
)

// forgetDeadInstanceRecords removes, from this checkout's own work roots,
// the external-mode records a killed self-validation left whose node was
// one of its own managed instances (its conf dir is under _output) and
// whose endpoint answers no more.
// That instance died with the killed run and the sweep took its pods;
// `cnifault restore` cannot reach it, and preflight would refuse every
// later external run here ("run cnifault restore first") for good. A
// record naming any other endpoint is left for preflight to refuse, as it
// would be on a user's node.
func forgetDeadInstanceRecords() {
	roots, _ := filepath.Glob(filepath.Join(repoRoot, "_output", "work*"))
	own := filepath.Join(repoRoot, "_output") + string(filepath.Separator)
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || !strings.HasPrefix(d.Name(), "external-") {
				return nil
			}
			r, rerr := external.ReadRecord(path)
			if rerr != nil {
				return filepath.SkipDir
			}
			socket := strings.TrimPrefix(r.Endpoint, "unix://")
			if strings.HasPrefix(r.ConfDir, own) && !host.SocketAnswers(socket) {
				GinkgoWriter.Printf("forgetting %s: a killed self-validation's record of its own instance at %s, which answers no more\n", path, r.Endpoint)
				_ = os.RemoveAll(path)
			}
			return filepath.SkipDir
		})
	}
}
