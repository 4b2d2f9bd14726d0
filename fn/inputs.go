package fn

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
)

// inputs is everything a composition depends on. newRelay reads nothing
// else, and the composition cache keys on its JSON encoding, so an input
// that is not in here cannot shape what is composed, and one that is can
// never be served stale.
type inputs struct {
	// Name, Namespace and the claim labels of the XR, and its spec.
	Name, Namespace           string
	ClaimName, ClaimNamespace string
	Spec                      map[string]any
	// Input is the function's Input, nil when the step has none.
	Input map[string]any
	// ProxyClassCRD is nil until Crossplane looked for the ProxyClass CRD,
	// then whether it exists.
	ProxyClassCRD *bool
	// ProxyClasses is what Crossplane found of spec.proxyClass: nil until it
	// looked, then the (zero or one) ProxyClass. JSON tells nil from empty.
	ProxyClasses []map[string]any
	// PodMonitorCRD is nil until Crossplane looked for the PodMonitor CRD,
	// then whether it exists.
	PodMonitorCRD *bool
	// AWS is what was observed of the replicas' AWS placement.
	AWS *awsObserved
	// Existing are the keys of the composed objects that exist, of those
	// whose creation waits for others (see relay.composable).
	Existing []string
}

// readInputs takes from the request what a composition depends on.
func readInputs(req *fnv1.RunFunctionRequest, xr *resource.Composite, obs observedState) (inputs, error) {
	labels := xr.Resource.GetLabels()
	in := inputs{
		Name: xr.Resource.GetName(), Namespace: xr.Resource.GetNamespace(),
		ClaimName: labels[labelClaimName], ClaimNamespace: labels[labelClaimNamespace],
	}
	if spec, ok := xr.Resource.Object["spec"]; ok {
		m, ok := spec.(map[string]any)
		if !ok {
			return inputs{}, specError{err: fmt.Errorf("spec: must be an object, got %T", spec)}
		}
		in.Spec = m
	}
	if req.GetInput() != nil {
		in.Input = req.GetInput().AsMap()
	}
	if crds, ok, err := request.GetRequiredResource(req, requiredProxyClassCRDKey); err == nil && ok {
		exists := len(crds) > 0 // only its presence counts
		in.ProxyClassCRD = &exists
	}
	if crds, ok, err := request.GetRequiredResource(req, requiredPodMonitorCRDKey); err == nil && ok {
		exists := len(crds) > 0
		in.PodMonitorCRD = &exists
	}
	if pcs, ok, err := request.GetRequiredResource(req, requiredProxyClassKey); err == nil && ok {
		in.ProxyClasses = make([]map[string]any, 0, len(pcs))
		for _, pc := range pcs {
			in.ProxyClasses = append(in.ProxyClasses, pc.Resource.Object)
		}
	}
	in.AWS = observeAWS(in.Spec, obs)
	for key, oc := range obs.observed {
		_, sts := replicaIndex(string(key), keyPrefixStatefulSet)
		if oc.Resource != nil && (sts || key == keyServiceAccount || key == keyRole || key == keyRoleBinding) {
			in.Existing = append(in.Existing, string(key))
		}
	}
	slices.Sort(in.Existing)
	return in, nil
}

// key identifies the composition: encoding/json writes map keys sorted,
// so equal inputs encode equally.
func (in inputs) key() (k [sha256.Size]byte, size int, err error) {
	b, err := json.Marshal(in)
	if err != nil {
		return k, 0, fmt.Errorf("cannot encode the composition's inputs: %w", err)
	}
	return sha256.Sum256(b), len(b), nil
}
