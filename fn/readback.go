package fn

import (
	"cmp"
	"fmt"
	"sort"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// needsPods tells whether the function asks Crossplane for the relay pods:
// only managed load balancers need them, for the pod IPs they register as
// targets. Otherwise a pod's readiness is its StatefulSet's readyReplicas,
// which Crossplane already watches. Every required pod is a watch event
// (twice per update) on the PeerRelay's circuit breaker, and a required kind
// is cached by Crossplane cluster-wide: every Pod in the cluster.
func needsPods(r *relay) bool { return r.managedLoadBalancers() }

// requirePods asks Crossplane for the relay pods, so status can say which
// replica's pod is ready and which IP a target group registers.
func requirePods(rsp *fnv1.RunFunctionResponse, r *relay) {
	ns := r.Namespace
	require(rsp, requiredPodsKey, &fnv1.ResourceSelector{
		ApiVersion: "v1",
		Kind:       "Pod",
		Namespace:  &ns,
		Match:      &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: selectorLabels(r)}},
	})
}

// require adds a resource requirement, whichever requirement comes first.
func require(rsp *fnv1.RunFunctionResponse, key string, sel *fnv1.ResourceSelector) {
	if rsp.Requirements == nil {
		rsp.Requirements = &fnv1.Requirements{}
	}
	if rsp.Requirements.Resources == nil {
		rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{}
	}
	rsp.Requirements.Resources[key] = sel
}

// requireAuthKey asks Crossplane for the auth key Secret, only to tell the
// user when it is missing. Its data is never read, logged or copied.
func requireAuthKey(rsp *fnv1.RunFunctionResponse, r *relay) {
	if r.AuthKey == nil {
		return
	}
	ns := r.Namespace
	require(rsp, requiredAuthKeyKey, &fnv1.ResourceSelector{
		ApiVersion: "v1",
		Kind:       "Secret",
		Namespace:  &ns,
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: r.AuthKey.Name},
	})
}

// requiredAuthKey says what is wrong with the auth key Secret, or "" when
// it is fine or Crossplane has not looked yet.
func requiredAuthKey(req *fnv1.RunFunctionRequest, r *relay) string {
	if r.AuthKey == nil {
		return ""
	}
	secrets, ok, err := request.GetRequiredResource(req, requiredAuthKeyKey)
	if err != nil || !ok {
		return ""
	}
	if len(secrets) == 0 {
		return fmt.Sprintf("Secret %s/%s named by spec.authKeySecretRef does not exist: create it with a reusable, pre-authorised auth key under key %q", r.Namespace, r.AuthKey.Name, r.AuthKey.Key)
	}
	data, _, _ := unstructured.NestedMap(secrets[0].Resource.Object, "data")
	if _, has := data[r.AuthKey.Key]; !has {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Sprintf("Secret %s/%s named by spec.authKeySecretRef has no key %q (it has %v): set spec.authKeySecretRef.key", r.Namespace, r.AuthKey.Name, r.AuthKey.Key, keys)
	}
	return ""
}

// setStatus writes status.endpoints, status.replicas and status.addresses
// on the desired XR, keeping whatever earlier steps put there.
func setStatus(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, st v1alpha1.PeerRelayStatus) error {
	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		return fmt.Errorf("cannot read the desired PeerRelay: %w", err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("cannot convert the PeerRelay's status: %w", err)
	}
	// Written even when empty (omitempty left them out): an empty list
	// replaces the last one.
	for f, empty := range map[string]any{"endpoints": []any{}, "replicas": []any{}, "addresses": ""} {
		if err := dxr.Resource.SetValue("status."+f, cmp.Or(m[f], empty)); err != nil {
			return fmt.Errorf("cannot set status.%s: %w", f, err)
		}
	}
	return response.SetDesiredCompositeResource(rsp, dxr)
}

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
