package fn

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestCachedCompositionIsTheSame: a second call with the same spec answers
// exactly what a fresh function answers, and a changed spec, name or Input
// is never served from the cache.
func TestCachedCompositionIsTheSame(t *testing.T) {
	f := &Function{Log: logging.NewNopLogger()}
	call := func(f *Function, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
		t.Helper()
		rsp, err := f.RunFunction(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return rsp
	}
	reqs := map[string]func() *fnv1.RunFunctionRequest{
		"base": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2")}}
		},
		"replicas": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 3")}}
		},
		"port": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2\nport: 7000")}}
		},
		"input": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2")}, Input: mustStruct(t, "apiVersion: fn.peerrelay.io/v1alpha1\nkind: Input\ncloud: azure")}
		},
		"namespace": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, "apiVersion: peerrelay.io/v1alpha1\nkind: PeerRelay\nmetadata: {name: my-relay, namespace: team-z}\nspec: {replicas: 2}")}}}
		},
		// The ProxyClass lookup's stages: not asked yet, no CRD, CRD but
		// no ProxyClass yet, none found. Each answers differently.
		"proxyclass": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2\nproxyClass: edge")}}
		},
		"proxyclass no CRD": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2\nproxyClass: edge")},
				RequiredResources: map[string]*fnv1.Resources{requiredProxyClassCRDKey: {}}}
		},
		"proxyclass CRD": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2\nproxyClass: edge")},
				RequiredResources: map[string]*fnv1.Resources{requiredProxyClassCRDKey: {Items: []*fnv1.Resource{{Resource: mustStruct(t, "kind: CustomResourceDefinition")}}}}}
		},
		"proxyclass none": func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2\nproxyClass: edge")},
				RequiredResources: map[string]*fnv1.Resources{requiredProxyClassCRDKey: {Items: []*fnv1.Resource{{Resource: mustStruct(t, "kind: CustomResourceDefinition")}}}, requiredProxyClassKey: {}}}
		},
	}
	for _, order := range [][]string{
		{"base", "replicas", "port", "input", "namespace", "base"},
		{"input", "base", "namespace", "port", "replicas"},
		{"proxyclass", "proxyclass no CRD", "proxyclass CRD", "proxyclass none", "proxyclass"},
	} {
		for _, name := range order {
			got := call(f, reqs[name]())
			want := call(&Function{Log: logging.NewNopLogger()}, reqs[name]())
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s after %v: the cached answer differs from a fresh one (-fresh +cached):\n%s", name, order, diff)
			}
		}
	}
}

// TestCacheSizeEstimate: the size the cache accounts for an entry is at
// least what its objects take encoded, for a minimal PeerRelay and for a
// hostile one (many replicas, large annotations), and a stream of hostile
// PeerRelays keeps the cache within maxCachedBytes.
func TestCacheSizeEstimate(t *testing.T) {
	big := "replicas: 20\nservice:\n  annotations:\n" + strings.Repeat("    example.com/a: \""+strings.Repeat("x", 60000)+"\"\n", 1)
	for name, spec := range map[string]string{"Minimal": "replicas: 1", "Default": "replicas: 2", "Hostile": big} {
		in := read(t, spec, nil)
		_, size, err := in.key()
		if err != nil {
			t.Fatal(err)
		}
		f := &Function{Log: logging.NewNopLogger()}
		c, err := f.composition(in)
		if err != nil {
			t.Fatal(err)
		}
		actual := 0
		for _, o := range c.objs {
			b, err := json.Marshal(o.obj)
			if err != nil {
				t.Fatal(err)
			}
			actual += len(b)
		}
		estimate := (size + fixedObjectSize) * (len(c.objs) + 1)
		t.Logf("%s: %d objects, estimated %d bytes, encoded %d", name, len(c.objs), estimate, actual)
		if estimate < actual {
			t.Errorf("%s: estimated %d bytes, the objects take %d", name, estimate, actual)
		}
		if f.cache.bytes != estimate {
			t.Errorf("%s: not cached", name)
		}
	}
	f := &Function{Log: logging.NewNopLogger()}
	for i := range 200 {
		if _, err := f.composition(read(t, big+fmt.Sprintf("port: %d", 1000+i), nil)); err != nil {
			t.Fatal(err)
		}
		if f.cache.bytes > maxCachedBytes {
			t.Fatalf("after %d hostile PeerRelays the cache holds an estimated %d bytes, over %d", i+1, f.cache.bytes, maxCachedBytes)
		}
	}
}
