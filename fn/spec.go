package fn

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// crossplaneSpecFields are the spec fields Crossplane itself adds to XRs (v2
// under spec.crossplane, legacy at the top of spec). They are not ours to
// validate.
var crossplaneSpecFields = []string{
	"crossplane", "claimRef", "compositionRef", "compositionSelector",
	"compositionRevisionRef", "compositionRevisionSelector",
	"compositionUpdatePolicy", "compositeDeletePolicy", "resourceRefs",
	"writeConnectionSecretToRef", "publishConnectionDetailsTo",
	"environmentConfigRefs",
}

// relay is one PeerRelay as the function composes it: the user's spec
// with every default applied (relaySpec), and what the function decided
// from it and from what was observed (relayPlan).
type relay struct {
	relaySpec
	relayPlan
}

// relaySpec is the PeerRelay the user wrote, every default applied.
type relaySpec struct {
	// Name and Namespace of the PeerRelay the user wrote: the XR's own for
	// a v2 XR, the claim's for a legacy XR.
	Name      string
	Namespace string
	// Base prefixes every composed object's name; Name unless Name is too
	// long or not a valid DNS label (see names.go).
	Base string
	// BaseReason says why Base differs from Name, or is empty.
	BaseReason string

	Spec     v1alpha1.PeerRelaySpec
	Replicas int
	Port     int32
	Tags     []string
	Image    string
	Hostname string // prefix; replica i is Hostname-i
	AuthKey  *v1alpha1.SecretKeyRef

	Cloud          fnv1alpha1.Cloud
	ProviderConfig providerConfigRef

	// Legacy is set for a cluster-scoped XPeerRelay; XRBase is baseName of
	// its own (cluster-unique) name.
	Legacy bool
	XRBase string
}

// relayPlan is what the function decided from the spec and what Crossplane
// supplied: the pod settings, what does not apply and why, which objects
// may be composed yet, and the AWS placement.
type relayPlan struct {
	// Pod is the ProxyClass (if any) with spec.pod layered on top.
	Pod podSettings
	// ProxyClassProblem says why spec.proxyClass does not apply (no CRD,
	// no such ProxyClass, not offered to the namespace), once Crossplane
	// has looked.
	ProxyClassProblem string
	// proxyClassCRD is true once the ProxyClass CRD is known to exist.
	proxyClassCRD bool
	// podMonitorCRD is nil until Crossplane looked for the PodMonitor CRD,
	// then whether it exists.
	podMonitorCRD *bool
	// existing is inputs.Existing (see composable).
	existing []string
	// AWS places replicas on AWS; nil unless spec.aws pins them to subnets.
	AWS *awsPlan
}

// podMonitor returns the PodMonitor asked for, spec.metrics.podMonitor
// winning over the ProxyClass's serviceMonitor; nil for none.
func (r *relay) podMonitor() *v1alpha1.PodMonitor {
	m := r.Pod.Monitor
	if r.Spec.Metrics != nil && r.Spec.Metrics.PodMonitor != nil {
		m = r.Spec.Metrics.PodMonitor
	}
	if m == nil || !m.Enable || !r.metrics() {
		return nil
	}
	return m
}

// metrics tells whether the relay pods serve their metrics: spec.metrics
// or the ProxyClass's spec.metrics asks for them.
func (r *relay) metrics() bool {
	return r.Pod.Metrics || (r.Spec.Metrics != nil && r.Spec.Metrics.Enable)
}

// perReplicaZones tells whether each replica runs in its subnet's zone:
// asked for, or by default when replicas are pinned to subnets, since a
// pinned subnet enables only its own zone on the replica's NLB and an NLB
// forwards only to targets in its enabled zones.
func (r *relay) perReplicaZones() bool {
	a := r.Spec.AWS
	if a == nil {
		return false
	}
	pinned := len(a.ElasticIPs) > 0 || len(a.Subnets) > 0
	return a.ZonePlacement == v1alpha1.ZonePlacementPerReplica || (a.ZonePlacement == "" && pinned)
}

// composable tells whether the object under key may be composed now.
// Kubernetes refuses some objects until others exist, and what it refuses
// is retried with a back-off of seconds, sometimes tens of seconds:
//   - a RoleBinding before its Role: Crossplane may not bind a role it
//     cannot read (no escalate or bind verb), so the create fails;
//   - a StatefulSet before its pod's ServiceAccount: the StatefulSet
//     controller's pod create is refused and it backs off; and before the
//     Role and RoleBinding, containerboot cannot write its state Secret.
//
// An object that exists stays composed whatever else is missing: dropping
// it from the desired state would delete it (a running pod).
func (r *relay) composable(key string) bool {
	exists := func(k string) bool { _, ok := slices.BinarySearch(r.existing, k); return ok }
	if exists(key) {
		return true
	}
	switch {
	case key == keyRoleBinding:
		return exists(keyRole)
	case strings.HasPrefix(key, keyPrefixStatefulSet):
		return exists(keyServiceAccount) && exists(keyRole) && exists(keyRoleBinding)
	}
	return true
}

// nodeMode says how a replica is reached on the node its pod runs on
// (spec.hostPort, spec.service.type NodePort); empty: on a load balancer.
func (r *relay) nodeMode() relayv1alpha1.NodeMode {
	switch {
	case r.Spec.HostPort:
		return relayv1alpha1.NodeModeHostPort
	case r.Spec.Service != nil && r.Spec.Service.Type == corev1.ServiceTypeNodePort:
		return relayv1alpha1.NodeModeNodePort
	}
	return ""
}

func (r *relay) managedLoadBalancers() bool {
	return r.Spec.AWS != nil && r.Spec.AWS.LoadBalancer == v1alpha1.LoadBalancerManaged
}

type providerConfigRef struct{ Kind, Name string }

// parseSpec reads the XR's spec strictly: unknown fields and wrong types are
// errors that name the field.
func parseSpec(m map[string]any) (v1alpha1.PeerRelaySpec, error) {
	var spec v1alpha1.PeerRelaySpec
	if m == nil {
		return spec, nil
	}
	own := make(map[string]any, len(m))
	for k, v := range m {
		own[k] = v
	}
	for _, k := range crossplaneSpecFields {
		delete(own, k)
	}
	b, err := json.Marshal(own)
	if err != nil {
		return spec, fmt.Errorf("spec: %w", err)
	}
	// Kubernetes' own decoder: case-sensitive (encoding/json would take
	// "elasticIps" for "elasticIPs"), and strict about unknown and
	// duplicate fields.
	strict, err := kjson.UnmarshalStrict(b, &spec)
	if err != nil {
		return spec, fmt.Errorf("spec: %s", describeJSONError(err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = describeJSONError(e)
		}
		return spec, fmt.Errorf("spec: %s", strings.Join(msgs, "; "))
	}
	return spec, nil
}

// typeError matches the decoder's type errors: "json: cannot unmarshal
// string into Go struct field PeerRelaySpec.aws.elasticIPs of type []v1alpha1.ElasticIP".
var typeError = regexp.MustCompile(`cannot unmarshal (.+) into Go (?:struct field [A-Za-z0-9_]+\.(\S+)|value) of type (\S+)`)

// describeJSONError rewrites the decoder's messages into field paths a user
// recognises: "spec.replicas: want an integer, got string".
func describeJSONError(err error) string {
	msg := err.Error()
	if m := typeError.FindStringSubmatch(msg); m != nil {
		if m[2] == "" {
			return fmt.Sprintf("want an object, got %s", m[1])
		}
		return fmt.Sprintf("spec.%s: want %s, got %s", m[2], jsonKind(m[3]), m[1])
	}
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return fmt.Sprintf("unknown field %s: PeerRelay has no such field (check its spelling and nesting)", f)
	}
	return strings.TrimPrefix(msg, "json: ")
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case goType == "string", strings.HasSuffix(goType, ".Tag"):
		return "a string"
	case goType == "bool":
		return "true or false"
	}
	return "an object"
}
