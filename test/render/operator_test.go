package render

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/fn"
	"github.com/peerrelay/peerrelay/test/harness"
)

// TestOperatorManifests: moving from the Tailscale operator is a change of
// apiVersion only. Every PeerRelay in examples/operator (the operator
// guide's manifests, every field of its API reference, and the fields it
// gained after v1.102.5: spec.service.port, spec.staticEndpoints) is accepted by
// the API server against our schema, CEL rules included, and composed by
// the function without a Fatal result; what does not apply is a Warning.
func TestOperatorManifests(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples/operator/*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("examples/operator holds %d manifests (%v)", len(files), err)
	}
	c := harness.StartAPIServer(t, filepath.Join(root, "apis/peerrelay/crd")).ClientIn(t, "team-a")
	ctx := context.Background()
	t.Run("TailnetImmutable", func(t *testing.T) {
		pr := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "peerrelay.io/v1alpha1", "kind": "PeerRelay",
			"metadata": map[string]any{"name": "tailnet-b", "namespace": "team-a"},
			"spec":     map[string]any{"tailnet": "tailnet-b"},
		}}
		if err := c.Create(ctx, pr); err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(pr.Object, "tailnet-c", "spec", "tailnet")
		if err := c.Update(ctx, pr); err == nil || !strings.Contains(err.Error(), "spec.tailnet is immutable") {
			t.Errorf("changing spec.tailnet: want it refused as immutable, got %v", err)
		}
	})
	f := &fn.Function{Log: logging.NewNopLogger()}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var proxyClasses []*fnv1.Resource
			docs := splitYAML(t, b)
			for _, obj := range docs {
				if obj.GetKind() == "ProxyClass" {
					s, err := structpb.NewStruct(obj.Object)
					if err != nil {
						t.Fatal(err)
					}
					proxyClasses = append(proxyClasses, &fnv1.Resource{Resource: s})
				}
			}
			for _, obj := range docs {
				if obj.GetKind() != "PeerRelay" {
					continue
				}
				if obj.GetAPIVersion() != "peerrelay.io/v1alpha1" {
					t.Fatalf("%s: apiVersion %s", obj.GetName(), obj.GetAPIVersion())
				}
				obj.SetNamespace("team-a")
				if err := c.Create(ctx, obj.DeepCopy(), client.DryRunAll); err != nil {
					t.Errorf("the API server refuses the operator's manifest: %v", err)
				}
				xr, err := structpb.NewStruct(obj.Object)
				if err != nil {
					t.Fatal(err)
				}
				// As Crossplane asks: the ProxyClass CRD exists, and the
				// ProxyClass is there when the manifest brings one.
				required := map[string]*fnv1.Resources{
					"proxyclass-crd": {Items: []*fnv1.Resource{{Resource: &structpb.Struct{}}}},
					"proxyclass":     {Items: proxyClasses},
				}
				// And, as after the first reconcile, what the pods run as:
				// the StatefulSets wait for it.
				observed := map[string]*fnv1.Resource{}
				for key, kind := range map[string]string{"serviceaccount": "v1/ServiceAccount", "role": "rbac.authorization.k8s.io/v1/Role", "rolebinding": "rbac.authorization.k8s.io/v1/RoleBinding"} {
					gv, k := path.Split(kind)
					s, err := structpb.NewStruct(map[string]any{"apiVersion": strings.TrimSuffix(gv, "/"), "kind": k, "metadata": map[string]any{"name": obj.GetName(), "namespace": "team-a"}})
					if err != nil {
						t.Fatal(err)
					}
					observed[key] = &fnv1.Resource{Resource: s}
				}
				rsp, err := f.RunFunction(ctx, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}, Resources: observed}, RequiredResources: required})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rsp.GetResults() {
					if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
						t.Errorf("the function refuses the operator's manifest: %s", r.GetMessage())
					}
				}
				if n := len(rsp.GetDesired().GetResources()); n < 3 {
					t.Errorf("composed %d resources", n)
				}
				if strings.Contains(file, "behind-nat") {
					// spec.service.port is the port of the Service, the
					// listener and the config; the static entries go with it.
					svc := rsp.GetDesired().GetResources()["service-0"].GetResource().AsMap()
					port, _, _ := unstructured.NestedSlice(svc, "spec", "ports")
					rc := rsp.GetDesired().GetResources()["relayconfig-0"].GetResource().AsMap()
					rcPort, _, _ := unstructured.NestedFieldNoCopy(rc, "spec", "forProvider", "port")
					static, _, _ := unstructured.NestedStringSlice(rc, "spec", "forProvider", "staticEndpoints")
					if len(port) != 1 || port[0].(map[string]any)["port"] != float64(6969) || rcPort != float64(6969) || len(static) != 2 {
						t.Errorf("spec.service.port 6969: Service ports %v, RelayConfig port %v, static endpoints %v", port, rcPort, static)
					}
				}
				if strings.Contains(file, "elastic-ips") {
					// The ProxyClass pins the pods to the subnets' zone: every
					// replica runs, in that zone.
					for i := range 3 {
						sts := rsp.GetDesired().GetResources()["statefulset-"+string(rune('0'+i))]
						if sts == nil || !strings.Contains(sts.GetResource().String(), "us-east-1a") {
							t.Errorf("replica %d: not composed in us-east-1a: %v", i, sts)
						}
					}
				}
			}
		})
	}
}
