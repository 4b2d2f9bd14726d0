package render

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerrelay/peerrelay/test/harness"
)

// TestActivationPolicy: the configuration package's
// ManagedResourceActivationPolicies activate provider-peerrelay's
// RelayConfig (peerrelay: the provider is safe-start) and exactly the AWS
// managed kinds the function composes in the render examples (peerrelay-aws,
// namespaced and legacy): one it lacks would have no CRD on a cluster that
// activates nothing by default, and one it lists needlessly is a CRD the
// cluster serves for nothing.
func TestActivationPolicy(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "package/configuration/activation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string][]string{}
	for _, d := range splitYAML(t, b) {
		if d.GetKind() != "ManagedResourceActivationPolicy" {
			t.Fatalf("activation.yaml: a %s", d.GetKind())
		}
		policies[d.GetName()], _, _ = unstructured.NestedStringSlice(d.Object, "spec", "activate")
	}
	if want := []string{"relayconfigs.relay.peerrelay.io"}; !slices.Equal(policies["peerrelay"], want) {
		t.Errorf("policy peerrelay activates %v, want %v", policies["peerrelay"], want)
	}
	if len(policies) != 2 {
		t.Errorf("activation.yaml: policies %v, want peerrelay and peerrelay-aws", slices.Collect(maps.Keys(policies)))
	}
	activated := policies["peerrelay-aws"]
	slices.Sort(activated)

	goldens, err := filepath.Glob(filepath.Join(root, "examples/render/golden/*.yaml"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no render goldens: %v", err)
	}
	var composed []string
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range splitYAML(t, b) {
			gvk := u.GroupVersionKind()
			if !strings.HasSuffix(gvk.Group, ".upbound.io") {
				continue
			}
			// An MRD is named as its CRD: plural.group.
			composed = append(composed, strings.ToLower(gvk.Kind)+"s."+gvk.Group)
		}
	}
	slices.Sort(composed)
	composed = slices.Compact(composed)
	if !slices.Equal(activated, composed) {
		t.Errorf("the policy activates %v\nthe function composes %v", activated, composed)
	}
}
