package fn

import (
	"net/netip"
	"strconv"
	"strings"

	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// observedState is what the function reads back from the cluster.
type observedState struct {
	// observed composed resources by key.
	observed map[resource.Name]resource.ObservedComposed
	// pods by name, from the required resources; nil when Crossplane has
	// not supplied them (yet).
	pods map[string]*composed.Unstructured
	// podsRequired: the function asks for the pods (needsPods); otherwise
	// readiness comes from the StatefulSets.
	podsRequired bool
	// reports are the composed RelayConfigs' status.atProvider, by
	// replica (providerReports).
	reports map[int]relayv1alpha1.RelayConfigObservation
	// last is the status the PeerRelay has now.
	last v1alpha1.PeerRelayStatus
	// awsKeys are the AWS managed resources composed for each replica
	// (awsKeysByReplica): a replica is ready only once each is.
	awsKeys map[int][]string
}

// awsKeyPrefixes are the AWS managed resources' keys: each is its prefix,
// the replica's index, and for a target "-" and the pod's IP.
var awsKeyPrefixes = []string{keyPrefixEIP, keyPrefixLoadBalancer, keyPrefixTargetGroup, keyPrefixListener, keyPrefixTarget}

// awsKeysByReplica returns the keys of the AWS managed resources among
// objs, by replica.
func awsKeysByReplica(objs []composedObject) map[int][]string {
	out := map[int][]string{}
	for _, o := range objs {
		for _, p := range awsKeyPrefixes {
			rest, ok := strings.CutPrefix(o.key, p)
			idx, _, _ := strings.Cut(rest, "-")
			if i, err := strconv.Atoi(idx); ok && err == nil {
				out[i] = append(out[i], o.key)
			}
		}
	}
	return out
}

// lastStatus is the status the observed PeerRelay carries.
func lastStatus(xr *resource.Composite) v1alpha1.PeerRelayStatus {
	var st v1alpha1.PeerRelayStatus
	_ = xr.Resource.GetValueInto("status", &st)
	return st
}

// unresponsive says whether Crossplane's watch circuit breaker is open on
// the PeerRelay (ttlUnheard).
func unresponsive(xr *resource.Composite) bool {
	return xr.Resource.GetCondition(v1alpha1.ConditionResponsive).Status == corev1.ConditionFalse
}

func (o observedState) get(key string) (*composed.Unstructured, bool) {
	oc, ok := o.observed[resource.Name(key)]
	return oc.Resource, ok && oc.Resource != nil
}

// isTrue tells whether obj's condition of type typ is True.
func isTrue(obj *composed.Unstructured, typ xpv2.ConditionType) bool {
	return obj.GetCondition(typ).Status == corev1.ConditionTrue
}

// replicaIndex reads the replica index of a key such as "service-3" with the
// given prefix ("service-").
func replicaIndex(key, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" || rest[0] < '0' || rest[0] > '9' {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil
}

// replicaObservation is one replica as observed.
type replicaObservation struct {
	endpoints    []v1alpha1.Endpoint
	serviceReady bool // the Service has a load balancer ingress
	configReady  bool // the RelayConfig reports Ready
	podReady     bool
	// podCreated: the replica's pod exists, ready or not.
	podCreated bool
	// awsPending: the replica's AWS managed resources not Ready yet.
	awsPending []string
	// lbAddress: the replica's load balancer has an address (static
	// endpoints alone do not count: no load balancer may exist yet; nor
	// do a NodePort or hostPort replica's node addresses).
	lbAddress bool
	// nodeAddress: the provider advertises the replica's node's address
	// (NodePort, hostPort).
	nodeAddress bool
	// staticOnly: the provider advertises the replica's static endpoints
	// and no load balancer address.
	staticOnly bool
	// nodeInternal: the provider advertises the InternalIP of the
	// replica's node, which has no ExternalIP.
	nodeInternal bool
	// key is the RelayConfig's AuthKeyAvailable condition, cleanup its
	// DeviceCleanup condition, providerConfig its ProviderConfigUsable,
	// reachable its Reachable (Status "" when the provider does not probe).
	key, cleanup, providerConfig, reachable xpv2.Condition
	// traffic is the provider's last sample of the relay's counters.
	traffic *relayv1alpha1.TrafficSample
}

func (o observedState) replica(r *relay, i int) replicaObservation {
	var ro replicaObservation
	if svc, ok := o.get(svcKey(i)); ok {
		ro.readService(svc, r, i)
	}
	if rc, ok := o.get(relayConfigKey(i)); ok {
		ro.readRelayConfig(rc, o.reports[i], i)
	}
	for _, k := range o.awsKeys[i] {
		// What the provider advertises can come before the load balancer
		// carries traffic (its listener pending, a target not registered).
		if mr, ok := o.get(k); !ok || !isTrue(mr, xpv2.TypeReady) {
			ro.awsPending = append(ro.awsPending, k)
		}
	}
	if sts, ok := o.get(statefulSetKey(i)); ok {
		n, _ := sts.GetInteger("status.replicas")
		ro.podCreated = n >= 1
	}
	switch {
	case o.pods != nil:
		if p, ok := o.pods[podName(r, i)]; ok {
			ro.podReady = isTrue(p, xpv2.ConditionType(corev1.PodReady))
			ro.podCreated = true
		}
	case o.podsRequired && i < len(o.last.Replicas) && o.last.Replicas[i].Index == int32(i):
		// Crossplane has not supplied the pods in this call (it asks on
		// the first call of each reconcile): keep what the PeerRelay says
		// rather than the StatefulSet's lagging count, or every reconcile
		// would flip PeerRelayReady and back.
		ro.podReady = o.last.Replicas[i].PodReady
	default:
		if sts, ok := o.get(statefulSetKey(i)); ok {
			n, _ := sts.GetInteger("status.readyReplicas")
			ro.podReady = n >= 1
		}
	}
	ro.podCreated = ro.podCreated || ro.podReady
	return ro
}

// readService takes replica i's load balancer address from its Service.
func (ro *replicaObservation) readService(svc *composed.Unstructured, r *relay, i int) {
	var ingress []corev1.LoadBalancerIngress
	_ = svc.GetValueInto("status.loadBalancer.ingress", &ingress)
	for _, in := range ingress {
		if in.IP != "" || in.Hostname != "" {
			ro.serviceReady = true
		}
		if a, err := netip.ParseAddr(in.IP); err == nil {
			ro.endpoints = append(ro.endpoints, v1alpha1.Endpoint{Replica: int32(i), Address: a.String(), Port: r.Port})
		}
	}
}

// readRelayConfig takes what the provider says of replica i: its
// conditions and what its config advertises, which wins over the bare
// ingress IPs (resolved hostnames, AWS addresses, static endpoints).
func (ro *replicaObservation) readRelayConfig(rc *composed.Unstructured, at relayv1alpha1.RelayConfigObservation, i int) {
	ro.configReady = isTrue(rc, xpv2.TypeReady)
	ro.key = rc.GetCondition(relayv1alpha1.ConditionAuthKey)
	ro.cleanup = rc.GetCondition(relayv1alpha1.ConditionDeviceCleanup)
	ro.providerConfig = rc.GetCondition(relayv1alpha1.ConditionProviderConfig)
	if c := rc.GetCondition(relayv1alpha1.ConditionReachable); c.Reason != "" {
		ro.reachable = c
	}
	ro.traffic = at.Traffic
	ro.nodeAddress = at.Source == relayv1alpha1.SourceNodeExternalIP || at.Source == relayv1alpha1.SourceNodeInternalIP
	ro.lbAddress = ro.serviceReady || (at.Source != "" && at.Source != relayv1alpha1.SourceStatic && !ro.nodeAddress)
	ro.staticOnly = at.Source == relayv1alpha1.SourceStatic && len(at.Endpoints) > 0
	ro.nodeInternal = at.Source == relayv1alpha1.SourceNodeInternalIP
	if len(at.Endpoints) > 0 {
		ro.endpoints = ro.endpoints[:0]
		for _, ep := range at.Endpoints {
			if ap, err := netip.ParseAddrPort(ep); err == nil {
				ro.endpoints = append(ro.endpoints, v1alpha1.Endpoint{Replica: int32(i), Address: ap.Addr().String(), Port: int32(ap.Port())})
			}
		}
	}
}
