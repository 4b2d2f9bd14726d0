package fn

import (
	"fmt"
	"sort"
	"strings"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// requirePods asks Crossplane for the relay pods, so status can say which
// replica's pod is ready.
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

// requiredPods returns the pods Crossplane supplied, by name, or nil when it
// supplied none.
func requiredPods(req *fnv1.RunFunctionRequest) map[string]*structpb.Struct {
	pods, ok := req.GetRequiredResources()[requiredPodsKey]
	if !ok {
		return nil
	}
	out := make(map[string]*structpb.Struct, len(pods.GetItems()))
	for _, p := range pods.GetItems() {
		out[str(p.GetResource(), "metadata", "name")] = p.GetResource()
	}
	return out
}

// readiness tells Crossplane when each composed resource is ready, so the XR
// is never Ready before every replica has an endpoint and a ready pod.
func readiness(key string, r *relay, o observedState, s summary) resource.Ready {
	if _, ok := o.get(key); !ok {
		return resource.ReadyFalse
	}
	if i, ok := indexed(key, "service-"); ok {
		return readyIf(i < len(s.replicas) && s.replicas[i].serviceReady)
	}
	if i, ok := indexed(key, "relayconfig-"); ok {
		return readyIf(i < len(s.replicas) && s.replicas[i].configReady)
	}
	if i, ok := indexed(key, "statefulset-"); ok {
		// Its pod's readiness, as PeerRelayReady sees it: the StatefulSet's
		// own readyReplicas lags the pod, and Ready would turn True a
		// reconcile after PeerRelayReady.
		return readyIf(i < len(s.replicas) && s.replicas[i].podReady)
	}
	switch {
	case isAWSKey(key):
		c, _ := o.get(key)
		return readyIf(conditionStatus(c, managedReadyConditionTyp) == "True")
	}
	return resource.ReadyTrue // exists: ServiceAccount, Role, RoleBinding, state Secrets
}

// isAWSKey tells the AWS managed resources' keys, which are ready when
// their provider says so.
func isAWSKey(key string) bool {
	for _, prefix := range []string{"eip-", "lb-", "targetgroup-", "listener-", "target-"} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

func readyIf(b bool) resource.Ready {
	if b {
		return resource.ReadyTrue
	}
	return resource.ReadyFalse
}

// setStatus writes status.endpoints and status.replicas on the desired XR,
// keeping whatever earlier steps put there. The Struct is written directly:
// the response shares the request's desired state, which is ours to change.
// With encoded, the lists are written for the gRPC server (wirestatus.go).
func setStatus(rsp *fnv1.RunFunctionResponse, st v1alpha1.PeerRelayStatus, encoded bool) error {
	var endpoints, replicas *structpb.Value
	// Strings protobuf would refuse go the checked way, to fail as it does.
	if encoded && validUTF8(st) {
		endpoints, replicas = encodedStatusLists(st)
	} else {
		var err error
		if endpoints, replicas, err = statusLists(st); err != nil {
			return err
		}
	}
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.Composite == nil {
		rsp.Desired.Composite = &fnv1.Resource{}
	}
	xr := rsp.Desired.Composite
	if xr.Resource == nil {
		xr.Resource = &structpb.Struct{}
	}
	if xr.Resource.Fields == nil {
		xr.Resource.Fields = map[string]*structpb.Value{}
	}
	status := xr.Resource.Fields["status"].GetStructValue()
	if status == nil {
		status = &structpb.Struct{}
		xr.Resource.Fields["status"] = structpb.NewStructValue(status)
	}
	if status.Fields == nil {
		status.Fields = map[string]*structpb.Value{}
	}
	status.Fields["endpoints"] = endpoints
	status.Fields["replicas"] = replicas
	status.Fields["addresses"] = structpb.NewStringValue(st.Addresses)
	return nil
}

// statusLists returns status.endpoints and status.replicas as Values.
func statusLists(st v1alpha1.PeerRelayStatus) (endpoints, replicas *structpb.Value, err error) {
	eps := make([]any, len(st.Endpoints))
	for i, e := range st.Endpoints {
		eps[i] = map[string]any{"replica": e.Replica, "address": e.Address, "port": e.Port}
	}
	reps := make([]any, len(st.Replicas))
	for i, r := range st.Replicas {
		m := map[string]any{"index": r.Index, "hostname": r.Hostname, "podReady": r.PodReady}
		if len(r.Endpoints) > 0 {
			list := make([]any, len(r.Endpoints))
			for j, ep := range r.Endpoints {
				list[j] = ep
			}
			m["endpoints"] = list
		}
		reps[i] = m
	}
	el, err := structpb.NewList(eps)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot set status.endpoints: %w", err)
	}
	rl, err := structpb.NewList(reps)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot set status.replicas: %w", err)
	}
	return structpb.NewListValue(el), structpb.NewListValue(rl), nil
}

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
