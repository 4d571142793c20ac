package cni_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cnifault/cnifault/fixtures/report"
	"github.com/cnifault/cnifault/fixtures/runtimes"
	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// unknownHandler is a runtime handler no runtime has: a RuntimeClass whose
// handler the node was never configured with.
const unknownHandler = "cnifault-no-such-handler"

// sandboxImageRestore bounds putting the sandbox image back after
// sandbox-image-missing: the adapter's own import (a CRI-O's skopeo copy
// into its storage is the slower, within a minute) and CRI seeing it.
const sandboxImageRestore = 90 * time.Second

// A RunPodSandbox that fails at a step before or after the network that
// has nothing to do with CNI: a RuntimeClass whose handler the runtime does
// not have, a sandbox image missing from the node (the pull moved into
// CRI's sandbox controller in containerd 2.x, after the pod's network is
// set up: containerd#12849, #13424). Either way it must leave nothing.
var _ = Describe("RunPodSandbox", func() {
	var sc *scenario
	current := func() *scenario { return sc }

	When("the pod's runtime handler is not configured", Scenario("unknown-runtime-handler"), Label("fault:sandbox"), func() {
		BeforeEach(func(ctx SpecContext) {
			sc = newScenario(ctx)
			By("installing bridge, and running the pod with runtime handler " + unknownHandler)
			sc.InstallNetwork(ctx, sc.chain())
			sc.RuntimeHandler = unknownHandler
			sc.ExpectRuntimeError(unknownHandler)
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})

	// The image is the harness's own, imported from its archive (the node
	// has no registry): its reference, localhost/cnifault/pause:v1, names a
	// registry on the node itself, so a pull the runtime attempts for it
	// never leaves the node, and fails there. A pod on the healthy network
	// first shows that it is the runtime's sandbox image (its verbose
	// status names the image it runs): a call that fails once it is gone
	// has met the fault even where the runtime's error names only the
	// registry it could not pull from (CRI-O 1.34: "pinging container
	// registry localhost").
	When("the sandbox image is missing from the node", KubeletScenario("sandbox-image-missing", kubeletCase{
		family: kubeletFirstAttempt,
		arms: func(ctx SpecContext, k *scenario) error {
			imp, ok := rt.(runtimes.SandboxImageImporter)
			if !ok {
				return fmt.Errorf("the harness removes no image of this runtime's")
			}
			return k.removeSandboxImage(ctx, imp)
		},
	}), Label("fault:sandbox", report.LabelManagedOnly), func() {
		BeforeEach(func(ctx SpecContext) {
			imp, ok := rt.(runtimes.SandboxImageImporter)
			if !ok {
				skipLacking(report.NeedManaged, "the harness removes no image of an external runtime's")
			}
			ref := imp.ImportedImage()
			sc = newScenario(ctx)
			By("installing bridge, observed by cni-fault")
			sc.InstallNetwork(ctx, sc.chain(sc.Fault()))

			By("starting a pod on the healthy network, to learn the runtime's sandbox image, and removing it")
			id, err := sc.RunPod(ctx, scn.Within(criCallTimeout), sc.PodConfigOf(1, 0))
			Expect(err).NotTo(HaveOccurred(), "the pod did not start on a healthy network")
			img, err := sc.SandboxImage(ctx, id)
			Expect(err).NotTo(HaveOccurred(), "the healthy pod's sandbox image")
			Expect(rt.CRI().StopPodSandbox(ctx, id)).To(Succeed(), "stopping the pod on the healthy network")
			Expect(rt.CRI().RemovePodSandbox(ctx, id)).To(Succeed(), "removing the pod on the healthy network")
			Expect(img).To(Equal(ref), "the runtime's sandbox image is not the one the harness imported")
			sc.Error = ""

			By("removing the sandbox image " + ref + " from the runtime")
			Expect(sc.removeSandboxImage(ctx, imp)).To(Succeed())
			sc.ExpectFault("the call to fail while the runtime's sandbox image, which the healthy pod ran, is absent", func(ctx context.Context) (string, bool) {
				if sc.Error == "" {
					return "", false
				}
				if has, err := rt.CRI().HasImage(ctx, ref); err != nil || has {
					return "", false
				}
				return "the call failed while the sandbox image " + ref + " the healthy pod ran was absent", true
			})
		}, NodeTimeout(scenarioSetupTimeout))
		itFailsAndLeavesNothing(current)
	})
})

// removeSandboxImage removes the runtime's sandbox image, the one the
// harness imported, and waits until the runtime no longer lists it; its
// re-import is registered first, so that the image comes back whatever
// happens after. A call that meets its absence names it.
func (sc *scenario) removeSandboxImage(ctx SpecContext, imp runtimes.SandboxImageImporter) error {
	ref := imp.ImportedImage()
	sc.Repairs = append(sc.Repairs, func() error {
		ictx, cancel := context.WithTimeout(context.Background(), sandboxImageRestore)
		defer cancel()
		return imp.ImportSandboxImage(ictx)
	})
	if _, err := rt.CRI().Image.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		return fmt.Errorf("removing the sandbox image %s: %w", ref, err)
	}
	if !poll(ctx, time.Minute, func() bool {
		has, err := rt.CRI().HasImage(ctx, ref)
		return err == nil && !has
	}) {
		return fmt.Errorf("the runtime still lists the sandbox image %s it removed", ref)
	}
	sc.ExpectRuntimeError(ref)
	return nil
}
