// Command cnifault-nri is an NRI plugin that rejects a pod's lifecycle
// events on command: the failures beside the CNI call, after the network is
// up (containerd#13355, #13609). The harness installs it in a managed
// runtime's own NRI plugin dir, where the runtime launches it at start and
// again after every restart; it never connects to a node's NRI socket.
//
// Its config (cniconf.NRIPluginConfig) names a dir of per-scenario faults
// (cniconf.NRIFault, by pod UID) read at every event, and a journal that
// gets a line per event it sees, in cni-fault's format, before it answers.
// It exits when the runtime closes the connection, so it lives no longer
// than the runtime that launched it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/nri/pkg/stub"
)

func main() {
	p := &plugin{}
	s, err := stub.New(p, stub.WithOnClose(func() { os.Exit(0) }))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cnifault-nri: %v\n", err)
		os.Exit(1)
	}
	if err := s.Run(context.Background()); err != nil {
		p.logf("run: %v", err)
		os.Exit(1)
	}
}
