package fn

// Required resources: what the function asks Crossplane to fetch besides
// the observed XR and composed resources, and reads back on the next call.
// Every required kind is watched (each change is an event on the PeerRelay's
// circuit breaker) and cached cluster-wide by Crossplane, so the function
// asks for as little as it can.

import (
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource/composed"
)

// Requirement keys: how Crossplane tells the requirements apart across
// calls.
const (
	requiredPodsKey          = "pods"
	requiredProxyClassCRDKey = "proxyclass-crd"
	requiredProxyClassKey    = "proxyclass"
	requiredPodMonitorCRDKey = "podmonitor-crd"
)

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

// needsPods tells whether the function asks Crossplane for the relay pods:
// only managed load balancers need them, for the pod IPs they register as
// targets. Otherwise a pod's readiness is its StatefulSet's readyReplicas,
// which Crossplane already watches. Every required pod is a watch event
// (twice per update) on the PeerRelay's circuit breaker, and a required kind
// is cached by Crossplane cluster-wide: every Pod in the cluster.
func needsPods(r *relay) bool { return r.managedLoadBalancers() }

// requirePods asks Crossplane for the relay pods when it needs them
// (needsPods), so status can say which replica's pod is ready and which IP
// a target group registers.
func requirePods(rsp *fnv1.RunFunctionResponse, r *relay) {
	if !needsPods(r) {
		return
	}
	ns := r.Namespace
	require(rsp, requiredPodsKey, &fnv1.ResourceSelector{
		ApiVersion: "v1",
		Kind:       "Pod",
		Namespace:  &ns,
		Match:      &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: selectorLabels(r)}},
	})
}

// requiredPods returns the pods Crossplane supplied, by name, or nil when it
// has not looked for them yet.
func requiredPods(req *fnv1.RunFunctionRequest) (map[string]*composed.Unstructured, error) {
	pods, ok, err := request.GetRequiredResource(req, requiredPodsKey)
	if err != nil || !ok {
		return nil, err
	}
	out := make(map[string]*composed.Unstructured, len(pods))
	for _, p := range pods {
		out[p.Resource.GetName()] = &composed.Unstructured{Unstructured: *p.Resource}
	}
	return out, nil
}

// requireProxyClass asks Crossplane for the ProxyClass CRD, and once it is
// known to exist, for the ProxyClass spec.proxyClass names.
func requireProxyClass(rsp *fnv1.RunFunctionResponse, r *relay) {
	if r.Spec.ProxyClass == "" {
		return
	}
	require(rsp, requiredProxyClassCRDKey, &fnv1.ResourceSelector{
		ApiVersion: "apiextensions.k8s.io/v1",
		Kind:       "CustomResourceDefinition",
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: proxyClassCRDName},
	})
	if !r.proxyClassCRD {
		return
	}
	require(rsp, requiredProxyClassKey, &fnv1.ResourceSelector{
		ApiVersion: "tailscale.com/v1alpha1",
		Kind:       "ProxyClass",
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: r.Spec.ProxyClass},
	})
}

// requirePodMonitorCRD asks Crossplane whether the PodMonitor CRD exists,
// when a PodMonitor is asked for: composing a kind the API server does not
// serve would fail the whole composition.
func requirePodMonitorCRD(rsp *fnv1.RunFunctionResponse, r *relay) {
	if r.podMonitor() == nil {
		return
	}
	require(rsp, requiredPodMonitorCRDKey, &fnv1.ResourceSelector{
		ApiVersion: "apiextensions.k8s.io/v1",
		Kind:       "CustomResourceDefinition",
		Match:      &fnv1.ResourceSelector_MatchName{MatchName: podMonitorCRDName},
	})
}
