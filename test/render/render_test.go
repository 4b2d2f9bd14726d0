// Package render renders examples/ through the real Crossplane renderer
// (crank render, Development runtime) against function-peerrelay served in
// this process, compares the output with golden files, and applies every
// rendered object to a real API server with server-side dry-run so each one
// is schema-valid.
package render

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/test/harness"
)

var update = flag.Bool("update", false, "rewrite the golden files under examples/render/golden")

// renderCase is one crank render: `make render` prints each under its
// title, and the test compares each with examples/render/golden/<name>.yaml.
type renderCase struct {
	name, title, xr, composition string
	flags                        []string
}

const (
	compositionV2     = "package/configuration/composition-v2.yaml"
	compositionLegacy = "package/configuration/composition-legacy.yaml"
)

var cases = []renderCase{
	{"v2", "v2 PeerRelay", "examples/peerrelay.yaml", compositionV2, nil},
	{"v2-ready", "v2 PeerRelay, observed after the provider resolved endpoints", "examples/peerrelay.yaml", compositionV2,
		[]string{"--observed-resources", "examples/render/observed.yaml", "--required-resources", "examples/render/pods.yaml"}},
	{"legacy", "legacy XPeerRelay behind a claim", "examples/render/xr-legacy.yaml", compositionLegacy, nil},
	{"aws-eip", "AWS Elastic IPs", "examples/aws-eip.yaml", compositionV2, nil},
	{"aws-eip-checked", "AWS Elastic IPs, checked by the provider", "examples/aws-eip.yaml", compositionV2,
		[]string{"--observed-resources", "examples/render/observed-aws-eip.yaml"}},
	{"aws-allocate", "AWS Elastic IPs allocated by Crossplane: first pass", "examples/aws-allocate.yaml", compositionV2, nil},
	{"aws-allocate-allocated", "AWS Elastic IPs allocated by Crossplane: second pass", "examples/aws-allocate.yaml", compositionV2,
		[]string{"--observed-resources", "examples/render/observed-aws-allocate.yaml"}},
	{"aws-managed", "AWS Managed NLBs, per-replica zones: first pass", "examples/aws-managed.yaml", compositionV2, nil},
	{"aws-managed-allocated", "AWS Managed NLBs, per-replica zones: second pass", "examples/aws-managed.yaml", compositionV2,
		[]string{"--observed-resources", "examples/render/observed-aws-allocate.yaml", "--required-resources", "examples/render/pods-aws-managed.yaml"}},
	{"aws-managed-legacy", "AWS Managed NLBs for a legacy XPeerRelay", "examples/render/xr-legacy-aws.yaml", compositionLegacy,
		[]string{"--observed-resources", "examples/render/observed-aws-legacy.yaml", "--required-resources", "examples/render/pods-aws-legacy.yaml"}},
	{"minimal-nokey", "the operator guide's minimal PeerRelay, and a provider that cannot mint", "examples/render/xr-minimal.yaml", compositionV2,
		[]string{"--observed-resources", "examples/render/observed-nokey.yaml"}},
	{"two-steps", "a pipeline with a step before ours", "examples/peerrelay.yaml", "examples/render/composition-two-steps.yaml", nil},
	{"gcp", "GKE: Input cloud gcp, no load balancer annotations", "examples/peerrelay.yaml", "examples/render/composition-gcp.yaml", nil},
	{"behind-nat", "behind NAT, dual-stack: spec.service.port and static endpoints", "examples/behind-nat.yaml", compositionV2, nil},
	{"nodeport", "no load balancer: a NodePort Service, the node advertised", "examples/nodeport.yaml", compositionV2, nil},
	{"hostport", "no load balancer: the relay's port bound on its node", "examples/hostport.yaml", compositionV2, nil},
}

func renderAll(t *testing.T, root string) map[string][]byte {
	t.Helper()
	crank := harness.Tool(t, "crank")
	_, addr := harness.StartFunctionBinary(t, harness.Tool(t, "function-peerrelay"), "--metrics-address=")
	funcs, err := os.ReadFile(filepath.Join(root, "examples/render/functions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// function-patch-and-transform runs the step before ours in two-steps.
	_, pt := harness.StartFunctionBinary(t, harness.Tool(t, "function-patch-and-transform"))
	funcs = bytes.ReplaceAll(funcs, []byte("127.0.0.1:9444"), []byte(pt))
	fpath := filepath.Join(t.TempDir(), "functions.yaml")
	if err := os.WriteFile(fpath, bytes.ReplaceAll(funcs, []byte("127.0.0.1:9443"), []byte(addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, c := range cases {
		args := append([]string{"render", c.xr, c.composition, fpath}, c.flags...)
		cmd := exec.Command(crank, args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: crank %s: %v\n%s", c.name, strings.Join(args, " "), err, stderr.String())
		}
		out[c.name] = b
		if os.Getenv("PEERRELAY_RENDER_PRINT") != "" { // make render
			fmt.Printf("# ===== %s: crossplane render %s\n%s", c.title, strings.Join(append([]string{c.xr, c.composition}, c.flags...), " "), b)
		}
	}
	return out
}

func TestRenderExamples(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rendered := renderAll(t, root)

	t.Run("Golden", func(t *testing.T) {
		for name, got := range rendered {
			golden := filepath.Join(root, "examples/render/golden", name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run: go test ./test/render -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s: render differs from %s (-want +got); if intended, run go test ./test/render -update:\n%s", name, golden, diff)
			}
		}
	})

	t.Run("ServerSideDryRun", func(t *testing.T) {
		upbound := filepath.Join(root, ".cache/upbound-crds")
		_, err := os.Stat(upbound)
		harness.Need(t, err == nil, "the Upbound AWS CRDs in %s (make tools)", upbound)
		// Crossplane's Usage, which v2 PeerRelays with allocated Elastic
		// IPs compose.
		usage := t.TempDir()
		crd, err := os.ReadFile(filepath.Join(harness.ModuleDir(t, "tools/crossplane", "github.com/crossplane/crossplane/v2"), "cluster/crds/protection.crossplane.io_usages.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(usage, "usages.yaml"), crd, 0o600); err != nil {
			t.Fatal(err)
		}
		api := harness.StartAPIServer(t, filepath.Join(root, "package/provider/crds"), filepath.Join(root, "apis/peerrelay/crd"), upbound, usage)
		c, err := client.New(api.Config, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, ns := range []string{"team-a", "team-b", "team-nat", "team-edge"} {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
		applied, awsNamespaced, awsCluster := 0, 0, 0
		for name, out := range rendered {
			for i, obj := range splitYAML(t, out) {
				if i == 0 {
					continue // the XR itself: its status only; the examples are checked below
				}
				prepare(obj)
				if namespacedUpbound(obj) {
					awsNamespaced++
				} else if strings.Contains(obj.GetAPIVersion(), ".aws.upbound.io/") {
					awsCluster++
				}
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner("render-test")); err != nil {
					t.Errorf("%s object %d (%s %s): the API server rejects it: %v", name, i, obj.GetKind(), obj.GetName(), err)
					continue
				}
				applied++
			}
		}
		// The examples a user copies must pass the schema the XRD carries.
		for _, ex := range []string{"examples/peerrelay.yaml", "examples/aws-eip.yaml", "examples/providerconfig.yaml", "examples/package/providerconfig.yaml"} {
			b, err := os.ReadFile(filepath.Join(root, ex))
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range splitYAML(t, b) {
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.FieldOwner("render-test")); err != nil {
					t.Errorf("%s: the API server rejects it: %v", ex, err)
				}
				applied++
			}
		}
		// The schema defaults nothing the function's Input may default:
		// a PeerRelay without port, tags or zonePlacement reaches the
		// function without them.
		minimal := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "peerrelay.io/v1alpha1", "kind": "PeerRelay",
			"metadata": map[string]any{"name": "minimal", "namespace": "team-a"},
			"spec":     map[string]any{"replicas": int64(1), "aws": map[string]any{"elasticIPs": []any{map[string]any{"subnetID": "subnet-0a", "allocationID": "eipalloc-0a"}}}},
		}}
		if err := c.Create(ctx, minimal, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		for _, f := range [][]string{{"spec", "port"}, {"spec", "tags"}, {"spec", "aws", "zonePlacement"}} {
			if v, ok, _ := unstructured.NestedFieldNoCopy(minimal.Object, f...); ok {
				t.Errorf("the PeerRelay schema defaults %s to %v: the function Input's default would never apply", strings.Join(f, "."), v)
			}
		}
		if applied < 30 {
			t.Errorf("dry-run applied only %d objects; the renders should hold more", applied)
		}
		// Every AWS kind, in both flavours, met a real Upbound schema.
		if awsNamespaced < 10 || awsCluster < 8 {
			t.Errorf("dry-run met %d namespaced and %d cluster-scoped AWS managed resources; the AWS renders hold more", awsNamespaced, awsCluster)
		}
	})
}

// prepare strips what only a live Crossplane could fill in: owner references
// to an XR with no uid, and status, which apply ignores.
func prepare(obj *unstructured.Unstructured) {
	obj.SetOwnerReferences(nil)
	obj.SetResourceVersion("")
	delete(obj.Object, "status")
}

// namespacedUpbound turns one of Upbound's namespaced (.m.) managed
// resources into its cluster-scoped twin and reports whether it did. The
// module proxy serves only provider-aws v1, whose CRDs are the cluster-scoped
// kinds; the v2 provider generates the .m. kinds from the same Terraform
// schema, so their forProvider fields are checked against the v1 CRDs. What
// differs (the namespace, namespaced references, providerConfigRef.kind) is
// removed first, and so is not checked here.
func namespacedUpbound(obj *unstructured.Unstructured) bool {
	if !strings.Contains(obj.GetAPIVersion(), ".aws.m.upbound.io/") {
		return false
	}
	obj.SetAPIVersion(strings.Replace(obj.GetAPIVersion(), ".aws.m.upbound.io/", ".aws.upbound.io/", 1))
	obj.SetNamespace("")
	unstructured.RemoveNestedField(obj.Object, "spec", "providerConfigRef", "kind")
	var dropNamespaces func(v any)
	dropNamespaces = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if m, ok := c.(map[string]any); ok && strings.HasSuffix(k, "Ref") {
					delete(m, "namespace")
				}
				dropNamespaces(c)
			}
		case []any:
			for _, c := range x {
				dropNamespaces(c)
			}
		}
	}
	dropNamespaces(obj.Object["spec"])
	return true
}

func splitYAML(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("cannot parse rendered YAML: %v\n%s", err, doc)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" {
			t.Fatalf("rendered document without kind: %s", doc)
		}
		if u.GroupVersionKind() == (schema.GroupVersionKind{}) {
			panic(fmt.Sprintf("no GVK: %v", m))
		}
		out = append(out, u)
	}
	return out
}
