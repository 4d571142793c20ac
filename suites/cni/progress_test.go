package cni_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"golang.org/x/sys/unix"
)

// progressTick is how often a terminal's live line is redrawn.
const progressTick = 200 * time.Millisecond

// progress shows each scenario as it runs: on a terminal one live line per
// scenario (id, elapsed, then the verdict), in CI logs plain start and end
// lines, so that a hanging scenario is visible before the suite ends.
type progress struct {
	out      io.Writer
	terminal bool
	mu       sync.Mutex
	stop     chan struct{}
	done     chan struct{}
}

var live = newProgress(os.Stdout)

func newProgress(f *os.File) *progress {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return &progress{out: f, terminal: err == nil && os.Getenv("CI") == ""}
}

func (p *progress) start(id string) {
	if !p.terminal {
		fmt.Fprintf(p.out, "RUN     %s\n", id)
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	began := time.Now()
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for {
			p.mu.Lock()
			fmt.Fprintf(p.out, "\r\033[K...     %-28s %5.1fs", id, time.Since(began).Seconds())
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (p *progress) end(id, verdict string, d time.Duration) {
	if p.terminal && p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
		fmt.Fprint(p.out, "\r\033[K")
	}
	fmt.Fprintf(p.out, "%-7s %-28s %5.1fs\n", strings.ToUpper(verdict), id, d.Seconds())
}

// registerProgress adds the nodes that show each scenario as it runs. It is
// called just before RunSpecs, not at package level: Ginkgo's PreviewSpecs
// (the catalog, read first) rebuilds the suite from its top-level containers
// and suite nodes only, so a top-level ReportBeforeEach declared with
// `var _ =` is silently gone by the time the specs run.
func registerProgress() {
	ReportBeforeEach(func(s SpecReport) {
		if s.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
		live.start(labelID(s.Labels()))
	})
	ReportAfterEach(func(s SpecReport) {
		if s.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			return
		}
		live.end(labelID(s.Labels()), verdict(s, ""), s.RunTime)
	})
}
