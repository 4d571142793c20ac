package cni_test

import (
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cnifault/cnifault/cniconf"
	"github.com/cnifault/cnifault/fixtures/inspect"
	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// portmapBackend is one of portmap's ways of writing a hostPort's rules,
// and what the node needs for it: every hostPort scenario runs once per
// backend, its id suffixed for nftables.
type portmapBackend struct {
	name, suffix string
	// need is the netfilter tool portmap writes with (report.NeedIPTables,
	// report.NeedNFTables), which the node must have.
	need string
}

var portmapBackends = []portmapBackend{
	{name: cniconf.PortmapIPTables, need: report.NeedIPTables},
	{name: cniconf.PortmapNFTables, suffix: "-nft", need: report.NeedNFTables},
}

// labels are the catalog labels every hostPort scenario of the backend
// carries beside its family's: its shape, and what it needs of the node.
func (b portmapBackend) labels(more ...string) Labels {
	return Label(append(more, scn.ShapeHostPort, report.NeedsLabel(report.NeedPortmap), report.NeedsLabel(b.need))...)
}

// usePortmap makes the scenario's pod a hostPort pod whose chain holds
// portmap writing through b (scn.Scenario.UsePortmap), and skips it where
// the node lacks what that needs: portmap in the runtime's bin dir (an
// external node's own; a managed instance's is the harness's build,
// plugins v1.10.0), or the backend's tool. (A runtime that maps hostPorts
// itself, CRI-O, hands portmap no mappings: its own table is read then.)
func (sc *scenario) usePortmap(b portmapBackend) {
	GinkgoHelper()
	if _, err := exec.LookPath(filepath.Join(rt.CNIBinDir(), "portmap")); err != nil {
		skipLacking(report.NeedPortmap, "the runtime's CNI bin dir has no portmap: "+err.Error())
	}
	tool := map[string]string{report.NeedIPTables: "iptables", report.NeedNFTables: "nft"}[b.need]
	if inspect.Tool(tool) == "" {
		skipLacking(b.need, tool+" is not installed on the node: portmap's "+b.name+" backend cannot write a hostPort's rules")
	}
	if b.need == report.NeedNFTables {
		if out, err := exec.Command(inspect.Tool("nft"), "list", "tables").CombinedOutput(); err != nil {
			skipLacking(b.need, "the kernel's nf_tables does not answer nft: "+string(out))
		}
	}
	sc.UsePortmap(b.name)
}

// A pod with a hostPort: portmap, chained after bridge, writes a DNAT rule
// to the pod's address and marks for its SNAT (iptables: a CNI-DN- chain
// of the pod's and its jump from CNI-HOSTPORT-DNAT; nftables: rules in the
// cni_hostport table commented with the container id). A failure after
// portmap ran, or a DEL that never reaches it, strands them: the port
// stays forwarded to an address the next pod may get. The harness binds
// the port to TEST-NET-1's 192.0.2.1, which no node holds, so that the
// rules steer no packet of the node's (scn.HostPortShape).
var _ = Describe("RunPodSandbox for a pod with a hostPort", func() {
	var sc *scenario
	current := func() *scenario { return sc }
	failAdd := cniconf.Fail(7, "cnifault: injected ADD error after portmap")
	failDel := cniconf.Fail(7, "cnifault: injected DEL error")

	for _, b := range portmapBackends {
		When("portmap ("+b.name+") wrote the pod's rules and a later plugin fails ADD and DEL",
			KubeletScenario("hostport-partial-add-del-fails"+b.suffix, kubeletCase{
				family: kubeletFirstAttempt, verb: cniconf.VerbAdd,
				faults: func(k *scenario) cniconf.Fault {
					return k.Fault().On(cniconf.VerbAdd, failAdd).On(cniconf.VerbDel, failDel)
				},
			}), b.labels("fault:partial"), func() {
				BeforeEach(func(ctx SpecContext) {
					sc = newScenario(ctx)
					sc.usePortmap(b)
					By("installing bridge, portmap (" + b.name + "), then cni-fault (ADD: error, DEL: error)")
					sc.InstallNetwork(ctx, sc.chain(sc.Fault().On(cniconf.VerbAdd, failAdd).On(cniconf.VerbDel, failDel)))
				}, NodeTimeout(scenarioSetupTimeout))
				itFailsAndLeavesNothing(current)
			})

		When("the runtime is killed while ADD hangs after portmap ("+b.name+") wrote the pod's rules",
			KubeletScenario("hostport-runtime-killed-mid-add"+b.suffix, kubeletCase{
				family: kubeletFirstAttempt, killed: true, verb: cniconf.VerbAdd,
				faults: func(k *scenario) cniconf.Fault {
					return k.Fault().On(cniconf.VerbAdd, cniconf.Hang().Times(1), cniconf.Pass())
				},
			}), b.labels("fault:crash", report.LabelManagedOnly, "kubelet:runtime-restart"), func() {
				var ctl runtimes.Controllable
				BeforeEach(func(ctx SpecContext) {
					ctl = controllable()
					sc = newScenario(ctx)
					sc.usePortmap(b)
					By("installing bridge, portmap (" + b.name + "), then cni-fault (ADD: hang once, then pass)")
					sc.InstallHangingAdd(ctx)
				}, NodeTimeout(scenarioSetupTimeout))
				itLeavesNothingOnceRestarted(current, func() runtimes.Controllable { return ctl })
			})
	}
})

// A live hostPort pod's teardown while DEL fails before it reaches
// portmap: kubelet's Stop must not remove the pod and strand its rules;
// once the fault clears, the DEL that passes removes them.
var _ = Describe("A live hostPort pod's teardown", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	for _, b := range portmapBackends {
		When("DEL fails before portmap ("+b.name+") after the pod started",
			KubeletScenario("hostport-teardown-del-error"+b.suffix, kubeletCase{
				family: kubeletTeardown, verb: cniconf.VerbDel,
				faults: func(k *scenario) cniconf.Fault {
					return k.Fault().On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error"))
				},
			}), b.labels("fault:teardown"), func() {
				BeforeEach(func(ctx SpecContext) {
					sc = newScenario(ctx)
					sc.usePortmap(b)
					By("installing the pod's network: bridge, portmap (" + b.name + "), cni-fault (every verb passes)")
					sc.InstallNetwork(ctx, sc.chain(sc.Fault()))
				}, NodeTimeout(scenarioSetupTimeout))

				itTearsDownAndLeavesNothing(current, teardownCase{
					inject: func(ctx SpecContext) {
						f := sc.Fault().On(cniconf.VerbDel, cniconf.Fail(7, "cnifault: injected DEL error"))
						Expect(sc.SetFaults(f.Faults)).To(Succeed())
						sc.ExpectJournal(f, cniconf.VerbDel)
					},
					clear: func(ctx SpecContext) { Expect(sc.SetFaults(nil)).To(Succeed()) },
				})
			})
	}
})
