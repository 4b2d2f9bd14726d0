package harness

import (
	"context"
	"path/filepath"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAPIServerServesOurCRDs proves the harness: the real API server accepts
// the provider's generated CRDs and stores a RelayConfig.
func TestAPIServerServesOurCRDs(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	api := StartAPIServer(t, filepath.Join(root, "package", "provider", "crds"))
	c, err := client.New(api.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var crds extv1.CustomResourceDefinitionList
	_ = extv1.AddToScheme(c.Scheme())
	if err := c.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	if len(crds.Items) != 4 {
		t.Errorf("want 4 provider CRDs installed, got %d", len(crds.Items))
	}
	rc := &unstructured.Unstructured{}
	rc.SetGroupVersionKind(schema.GroupVersionKind{Group: "relay.peerrelay.io", Version: "v1alpha1", Kind: "RelayConfig"})
	rc.SetNamespace("default")
	rc.SetName("r-0")
	_ = unstructured.SetNestedMap(rc.Object, map[string]any{
		"configSecretName": "r-0-config", "hostname": "r-0", "port": int64(41641),
	}, "spec", "forProvider")
	if err := c.Create(ctx, rc); err != nil {
		t.Fatalf("create RelayConfig: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(rc.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	// Defaults come from the generated schema: proof the CRD is ours.
	if res, _, _ := unstructured.NestedString(got.Object, "spec", "forProvider", "resolution"); res != "Auto" {
		t.Errorf("want defaulted resolution Auto, got %q", res)
	}
	bad := rc.DeepCopy()
	bad.SetName("r-1")
	bad.SetResourceVersion("")
	_ = unstructured.SetNestedField(bad.Object, int64(70000), "spec", "forProvider", "port")
	if err := c.Create(ctx, bad); err == nil {
		t.Error("the API server accepted port 70000; the schema's maximum did not apply")
	}
}
