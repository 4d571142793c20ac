// Package sonobuoy holds cnifault's Sonobuoy plugin definition and its test:
// the definition read by Sonobuoy's own loader (github.com/vmware-tanzu/
// sonobuoy, pinned in go.mod), so that a field Sonobuoy would not take
// fails the unit tests, and a node's results extracted by Sonobuoy's own
// tarball code, as its aggregator does. Only this test imports Sonobuoy:
// its dependencies (client-go, k8s.io/api) stay out of the cnifault binary.
package sonobuoy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmware-tanzu/sonobuoy/pkg/plugin/loader"
	"github.com/vmware-tanzu/sonobuoy/pkg/plugin/manifest"
	"github.com/vmware-tanzu/sonobuoy/pkg/tarball"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/cnifault/cnifault/fixtures/image"
	"github.com/cnifault/cnifault/fixtures/report"
	cnsonobuoy "github.com/cnifault/cnifault/fixtures/sonobuoy"
)

const pluginFile = "cnifault-plugin.yaml"

// load reads the definition as `sonobuoy run --plugin FILE` does
// (loader.LoadDefinition; the CLI's loadManifest decodes with the same
// manifest.Decoder), and also strictly (strict): Sonobuoy's decoder drops
// a field it does not know without a word, so a misspelt field (hostPid,
// tolerations at the wrong level) would silently vanish from the pod.
func load(t *testing.T, raw []byte) *manifest.Manifest {
	t.Helper()
	def, err := loader.LoadDefinition(raw)
	if err != nil {
		t.Fatalf("Sonobuoy's loader: %v", err)
	}
	if err := strict(raw); err != nil {
		t.Fatal(err)
	}
	return &def
}

// strict decodes raw into Sonobuoy's manifest as Kubernetes' strict
// decoding does: field names matched case-sensitively (as Sonobuoy's
// decoder, apimachinery's, matches them; encoding/json alone would take
// hostPid for hostPID), an unknown or duplicate field an error.
func strict(raw []byte) error {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return err
	}
	var m manifest.Manifest
	errs, err := kjson.UnmarshalStrict(j, &m, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("fields Sonobuoy's manifest does not have, which it would drop: %v", errors.Join(errs...))
	}
	return nil
}

func TestPluginDefinition(t *testing.T) {
	raw, err := os.ReadFile(pluginFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loader.LoadDefinitionFromFile(pluginFile); err != nil {
		t.Fatal(err)
	}
	def := load(t, raw)
	cfg := def.SonobuoyConfig
	if cfg.Driver != "DaemonSet" || cfg.PluginName != "cnifault" || cfg.ResultFormat != "junit" ||
		!slices.Equal(cfg.ResultFiles, []string{"junit.xml"}) || cfg.Description == "" ||
		!strings.HasPrefix(cfg.SourceURL, "https://") {
		t.Errorf("sonobuoy-config: %+v", cfg)
	}

	c := def.Spec.Container
	if c.Image != image.HarnessRef {
		t.Errorf("image %q, make image writes %q", c.Image, image.HarnessRef)
	}
	if want := "/" + image.HarnessBinDir + "/cnifault"; len(c.Command) != 1 || c.Command[0] != want {
		t.Errorf("command %q, want the image's %s", c.Command, want)
	}
	for _, a := range []string{"--sonobuoy", "--node", "--host-root=/host"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %q lack %s", c.Args, a)
		}
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("not privileged: %+v", c.SecurityContext)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	results := env[cnsonobuoy.ResultsDirEnv]
	if results != "/tmp/sonobuoy/results" {
		t.Errorf("%s=%q, want Sonobuoy's results dir", cnsonobuoy.ResultsDirEnv, results)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	// The worker sidecar mounts the "results" emptyDir at the same path.
	if m := mounts["results"]; m.MountPath != results {
		t.Errorf("results mounted at %q, want %q", m.MountPath, results)
	}
	if m := mounts["root"]; m.MountPath != "/host" {
		t.Errorf("host root mount %+v", m)
	}

	if def.PodSpec == nil {
		t.Fatal("no podSpec: Sonobuoy's default has no privileged host root for cnifault")
	}
	ps := def.PodSpec.PodSpec
	if !ps.HostPID || !ps.HostNetwork {
		t.Errorf("hostPID %v hostNetwork %v", ps.HostPID, ps.HostNetwork)
	}
	if !slices.ContainsFunc(ps.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
	}) {
		t.Errorf("tolerations %+v do not reach every node", ps.Tolerations)
	}
	if ps.ServiceAccountName != "sonobuoy-serviceaccount" || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("service account %q dns %q: the worker sidecar needs Sonobuoy's", ps.ServiceAccountName, ps.DNSPolicy)
	}
	var root *corev1.Volume
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == "root" {
			root = &ps.Volumes[i]
		}
	}
	if root == nil || root.HostPath == nil || root.HostPath.Path != "/" {
		t.Errorf("host root volume %+v", root)
	}
}

// The check itself: a misspelt field fails it, though Sonobuoy's loader
// takes the file.
func TestAMisspeltFieldFails(t *testing.T) {
	raw, err := os.ReadFile(pluginFile)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(raw, []byte("  hostPID: true"), []byte("  hostPid: true"), 1)
	if bytes.Equal(bad, raw) {
		t.Fatal("the definition has no hostPID line to misspell")
	}
	if _, err := loader.LoadDefinition(bad); err != nil {
		t.Fatalf("Sonobuoy's loader refused it (%v): the strict check would be redundant", err)
	}
	if err := strict(bad); err == nil || !strings.Contains(err.Error(), "hostPid") {
		t.Errorf("strict decoding took hostPid: %v", err)
	}
}

// What --sonobuoy hands over, posted by the worker and extracted by the
// aggregator with Sonobuoy's own tarball code into
// plugins/cnifault/results/<node>/, is a report compare reads and names
// by the node.
func TestTheHandedOverArchiveExtractsAsTheAggregatorDoes(t *testing.T) {
	results, reports := t.TempDir(), t.TempDir()
	r := report.Report{Runtime: report.Runtime{Name: "containerd", Version: "2.4.2"},
		Scenarios: []report.Scenario{{ID: "healthy-network", Verdict: "pass"}}}
	if _, err := r.WriteAll(reports); err != nil {
		t.Fatal(err)
	}
	archive, err := cnsonobuoy.Finish(results, reports, report.ExitPass, "", "")
	if err != nil {
		t.Fatal(err)
	}
	done, err := os.ReadFile(filepath.Join(results, cnsonobuoy.DoneFile))
	if err != nil || strings.TrimSpace(string(done)) != archive {
		t.Fatalf("done %q %v", done, err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tree := t.TempDir()
	node := filepath.Join(tree, "plugins", "cnifault", "results", "node-a")
	if err := tarball.DecodeTarball(f, node); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(node, "report.json")
	got, err := report.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if report.NodeOf(got, path) != "node-a" || got.Scenarios[0].Verdict != "pass" {
		t.Errorf("read back %+v from %s", got, path)
	}
	for _, name := range []string{"report.md", "report.html"} {
		if _, err := os.Stat(filepath.Join(node, name)); err != nil {
			t.Error(err)
		}
	}
}
