package selfvalidation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cnifault/cnifault/fixtures/daemon"
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
// would be on a user's node. What the record lists on the node itself —
// the run's links (its bridge) and its cgroup — outlived that instance,
// so it goes first; a cgroup still holding processes is named and kept.
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
				if err := host.DeleteLinks(r.Links); err != nil {
					GinkgoWriter.Printf("  %v\n", err)
				}
				if r.CgroupParent != "" {
					if err := daemon.RemoveCgroupsEventually(context.Background(), r.CgroupParent, staleCgroupGrace); err != nil {
						GinkgoWriter.Printf("  kept: %v\n", err)
					}
				}
				_ = os.RemoveAll(path)
			}
			return filepath.SkipDir
		})
	}
}

// staleCgroupGrace bounds the wait for a dead run's cgroup to empty: its
// runtime is gone, so nothing more will leave it.
const staleCgroupGrace = time.Second

var _ = Describe("A killed self-validation's record of its own dead instance", Serial, func() {
	It("is forgotten, and the bridge and cgroup it lists go with it", func() {
		run := fmt.Sprintf("%06x", os.Getpid()%0xffffff)
		work := filepath.Join(repoRoot, "_output", "work-stale-"+run)
		dir := filepath.Join(work, "external-"+run+"-p8")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		DeferCleanup(os.RemoveAll, work)

		By("leaving what a killed external run against a stand-in leaves")
		bridge := "cnf8-" + run
		addLink(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}})
		Expect(host.Cgroups().Hierarchies).NotTo(BeEmpty(), "no cgroup hierarchy")
		parent := "cnifault-" + run + "-p8"
		cgroup := filepath.Join(host.Cgroups().Hierarchies[0].Path, parent)
		Expect(os.Mkdir(cgroup, 0o755)).To(Succeed())
		DeferCleanup(func() { _ = syscall.Rmdir(cgroup) })
		raw, err := json.Marshal(external.Record{
			Schema:       external.RecordSchema,
			RunID:        run,
			Endpoint:     "unix://" + filepath.Join(work, "gone.sock"),
			ConfDir:      filepath.Join(work, "net.d"),
			Links:        []string{bridge},
			CgroupParent: "/" + parent, // as runs record it
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, external.RecordFile), raw, 0o644)).To(Succeed())

		By("starting a self-validation again")
		forgetDeadInstanceRecords()

		Expect(dir).NotTo(BeADirectory(), "the record")
		_, err = netlink.LinkByName(bridge)
		Expect(err).To(HaveOccurred(), "the record's bridge %s", bridge)
		Expect(cgroup).NotTo(BeADirectory(), "the record's cgroup")
	})
})
