// Package badinput runs the catalogue of malformed PeerRelays and
// RelayConfigs through the function (in process) and, for the rules a CRD
// schema can carry, against a real API server.
package badinput

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/fn"
	"github.com/peerrelay/peerrelay/test/harness"
)

type entry struct {
	Name      string         `json:"name"`
	Kind      string         `json:"kind"`
	Spec      map[string]any `json:"spec"`
	Object    map[string]any `json:"object"`
	Fn        []string       `json:"fn"`
	FnAccepts bool           `json:"fnAccepts"`
	CRD       any            `json:"crd"` // []string, or "accepted"
}

func load(t *testing.T) []entry {
	t.Helper()
	b, err := os.ReadFile("catalogue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var es []entry
	if err := yaml.UnmarshalStrict(b, &es); err != nil {
		t.Fatal(err)
	}
	if len(es) < 30 {
		t.Fatalf("the catalogue has %d entries; keep at least 30", len(es))
	}
	return es
}

func (e entry) object() map[string]any {
	if e.Object != nil {
		return e.Object
	}
	if e.Kind == "RelayConfig" {
		return map[string]any{
			"apiVersion": "relay.peerrelay.io/v1alpha1", "kind": "RelayConfig",
			"metadata": map[string]any{"name": "bad", "namespace": "team-a"},
			"spec":     map[string]any{"forProvider": e.Spec},
		}
	}
	return map[string]any{
		"apiVersion": "peerrelay.io/v1alpha1", "kind": "PeerRelay",
		"metadata": map[string]any{"name": "bad", "namespace": "team-a"},
		"spec":     e.Spec,
	}
}

func TestCatalogueThroughFunction(t *testing.T) {
	earlier := &fnv1.State{Resources: map[string]*fnv1.Resource{
		"from-earlier-step": {Resource: resource.MustStructJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)},
	}}
	f := &fn.Function{Log: logging.NewNopLogger()}
	for _, e := range load(t) {
		if e.Kind == "RelayConfig" {
			continue
		}
		t.Run(e.Name, func(t *testing.T) {
			b, err := json.Marshal(e.object())
			if err != nil {
				t.Fatal(err)
			}
			req := &fnv1.RunFunctionRequest{
				Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(string(b))}},
				Desired:  earlier,
			}
			rsp, err := f.RunFunction(context.Background(), req)
			if err != nil {
				t.Fatalf("RunFunction returned an error instead of a result: %v", err)
			}
			var fatal string
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					fatal = r.GetMessage()
				}
			}
			if e.FnAccepts {
				if fatal != "" {
					t.Errorf("the function should accept this, got Fatal: %s", fatal)
				}
				return
			}
			if fatal == "" {
				t.Fatalf("want a Fatal result, got %v", rsp.GetResults())
			}
			for _, want := range e.Fn {
				if !strings.Contains(fatal, want) {
					t.Errorf("Fatal %q lacks %q", fatal, want)
				}
			}
			if diff := cmp.Diff(earlier, rsp.GetDesired(), protocmp.Transform()); diff != "" {
				t.Errorf("half-applied: the desired state changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCatalogueAgainstAPIServer(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := harness.StartAPIServer(t, filepath.Join(root, "apis/peerrelay/crd"), filepath.Join(root, "package/provider/crds")).ClientIn(t, "team-a")
	ctx := context.Background()
	for _, e := range load(t) {
		t.Run(e.Name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: e.object()}
			err := c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict")) // as kubectl apply does
			if e.CRD == "accepted" {
				if err != nil {
					t.Errorf("the CRD rejects what only the function should: %v (update the catalogue)", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the API server accepted it")
			}
			wants, _ := e.CRD.([]any)
			if len(wants) == 0 {
				t.Fatalf("catalogue entry has no crd expectation: %v", e.CRD)
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w.(string)) {
					t.Errorf("rejection %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestTailnetCannotBeSetLater: spec.tailnet is immutable from creation, set
// or not. A PeerRelay created without one must not be pointed at another
// team's ClusterProviderConfig later: its RelayConfigs, refused there while
// they live, would have it named at deletion.
func TestTailnetCannotBeSetLater(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := harness.StartAPIServer(t, filepath.Join(root, "apis/peerrelay/crd")).ClientIn(t, "team-a")
	ctx := context.Background()
	for name, tc := range map[string]struct{ before, after map[string]any }{
		"Set":     {before: map[string]any{}, after: map[string]any{"tailnet": "team-b"}},
		"Changed": {before: map[string]any{"tailnet": "team-a"}, after: map[string]any{"tailnet": "team-b"}},
		"Removed": {before: map[string]any{"tailnet": "team-a"}, after: map[string]any{}},
	} {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "peerrelay.io/v1alpha1", "kind": "PeerRelay",
				"metadata": map[string]any{"name": strings.ToLower(name), "namespace": "team-a"},
				"spec":     tc.before,
			}}
			if err := c.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			u.Object["spec"] = tc.after
			err := c.Update(ctx, u)
			if err == nil || !strings.Contains(err.Error(), "spec.tailnet is immutable") {
				t.Errorf("update from %v to %v: %v, want refused as immutable", tc.before, tc.after, err)
			}
		})
	}
}

// TestResolveTimeoutBounded: a provider config's spec.resolveTimeout is at
// most 30 s (every lookup holds one of the provider's workers that long).
func TestResolveTimeoutBounded(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := harness.StartAPIServer(t, filepath.Join(root, "package/provider/crds")).ClientIn(t, "team-a")
	for timeout, ok := range map[string]bool{"30s": true, "5s": true, "31s": false, "1h": false} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "relay.peerrelay.io/v1alpha1", "kind": "ClusterProviderConfig",
			"metadata": map[string]any{"name": "t"},
			"spec":     map[string]any{"resolveTimeout": timeout},
		}}
		err := c.Create(context.Background(), u, client.DryRunAll)
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "spec.resolveTimeout is at most 30s")) {
			t.Errorf("resolveTimeout %s: %v, want accepted %v", timeout, err, ok)
		}
	}
}
