package fn

import (
	"math"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
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

// TestCanonicalEncodingTellsValuesApart: the cache key's encoding is the
// same for equal values however their maps iterate, and differs wherever
// the values do, including where a naive concatenation would collide.
func TestCanonicalEncodingTellsValuesApart(t *testing.T) {
	v := func(x any) *structpb.Value {
		t.Helper()
		val, err := structpb.NewValue(x)
		if err != nil {
			t.Fatal(err)
		}
		return val
	}
	values := map[string]*structpb.Value{
		"missing":                   nil,
		"null":                      v(nil),
		"true":                      v(true),
		"false":                     v(false),
		"string true":               v("true"),
		"number 1":                  v(1),
		"string 1":                  v("1"),
		"number -0":                 v(math.Copysign(0, -1)),
		"number 0":                  v(0),
		"empty string":              v(""),
		"empty struct":              v(map[string]any{}),
		"empty list":                v([]any{}),
		"list a,b":                  v([]any{"a", "b"}),
		"list ab":                   v([]any{"ab"}),
		"list b,a":                  v([]any{"b", "a"}),
		"struct a:b":                v(map[string]any{"a": "b"}),
		"struct ab:''":              v(map[string]any{"ab": ""}),
		"struct a:[b]":              v(map[string]any{"a": []any{"b"}}),
		"struct a,b":                v(map[string]any{"a": 1, "b": 2}),
		"struct a,b swapped values": v(map[string]any{"a": 2, "b": 1}),
		"nested":                    v(map[string]any{"a": map[string]any{"b": map[string]any{}}}),
		"nested list":               v(map[string]any{"a": []any{map[string]any{"b": nil}}}),
	}
	seen := map[string]string{}
	for name, val := range values {
		enc := string(appendCanonical(nil, val))
		if other, ok := seen[enc]; ok {
			t.Errorf("%s and %s encode the same: %q", name, other, enc)
		}
		seen[enc] = name
		// The same value, built again (its maps iterate in another order).
		again := proto.Clone(val).(*structpb.Value)
		if val == nil {
			again = nil
		}
		for range 5 {
			if got := string(appendCanonical(nil, again)); got != enc {
				t.Errorf("%s encodes differently when built again: %q, then %q", name, enc, got)
			}
		}
	}
}
