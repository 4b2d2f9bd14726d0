package fn

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// Condition type and reasons, the Tailscale operator's words.
const (
	conditionReady           = "PeerRelayReady"
	reasonReady              = "PeerRelayReady"
	reasonEndpointsPending   = "EndpointsPending"
	reasonPodsPending        = "PodsPending"
	reasonAWSConfigInvalid   = "AWSConfigInvalid"
	reasonSpecInvalid        = "SpecInvalid"
	reasonAuthKeyMissing     = "AuthKeySecretMissing"
	requiredPodsKey          = "pods"
	requiredAuthKeyKey       = "authkey-secret"
	podReadyConditionType    = "Ready"
	managedReadyConditionTyp = "Ready"
)

// observedState is what the function reads back from the cluster.
type observedState struct {
	observed map[resource.Name]resource.ObservedComposed
	// pods by name, from the required resources; nil when Crossplane has
	// not supplied them (yet).
	pods map[string]*composed.Unstructured
	// authKey says what is wrong with the auth key Secret, if anything.
	authKey string
}

// replicaObservation is one replica as observed.
type replicaObservation struct {
	endpoints    []v1alpha1.Endpoint
	serviceReady bool // the Service has a load balancer ingress
	configReady  bool // the RelayConfig reports Ready
	podReady     bool
}

func (o observedState) get(key string) (*composed.Unstructured, bool) {
	oc, ok := o.observed[resource.Name(key)]
	if !ok || oc.Resource == nil {
		return nil, false
	}
	return oc.Resource, true
}

func (o observedState) statefulSetReadyReplicas() int64 { return o.readyReplicas(keyStatefulSet) }

func (o observedState) readyReplicas(key string) int64 {
	sts, ok := o.get(key)
	if !ok {
		return 0
	}
	n, _ := sts.GetInteger("status.readyReplicas")
	return n
}

func (o observedState) replica(r *relay, i int) replicaObservation {
	var ro replicaObservation
	if svc, ok := o.get(svcKey(i)); ok {
		var ingress []struct {
			IP       string `json:"ip"`
			Hostname string `json:"hostname"`
		}
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
	if rc, ok := o.get(relayConfigKey(i)); ok {
		ro.configReady = rc.GetCondition(managedReadyConditionTyp).Status == "True"
		// The provider's list is what the replica actually advertises
		// (resolved hostnames, AWS addresses, static endpoints), so it wins
		// over the bare ingress IPs.
		if eps, _ := rc.GetStringArray("status.atProvider.endpoints"); len(eps) > 0 {
			ro.endpoints = ro.endpoints[:0]
			for _, ep := range eps {
				if ap, err := netip.ParseAddrPort(ep); err == nil {
					ro.endpoints = append(ro.endpoints, v1alpha1.Endpoint{Replica: int32(i), Address: ap.Addr().String(), Port: int32(ap.Port())})
				}
			}
		}
	}
	switch {
	case o.pods != nil:
		if p, ok := o.pods[podName(r, i)]; ok {
			ro.podReady = p.GetCondition(podReadyConditionType).Status == "True"
		}
	case r.perReplicaZones():
		ro.podReady = o.readyReplicas(statefulSetKey(i)) >= 1
	default:
		ro.podReady = o.statefulSetReadyReplicas() >= int64(r.Replicas)
	}
	return ro
}

// summary is the XR status and the PeerRelayReady condition.
type summary struct {
	status        v1alpha1.PeerRelayStatus
	replicas      []replicaObservation
	reason, msg   string
	ready         bool
	withEndpoints int
}

func summarise(r *relay, o observedState) summary {
	s := summary{status: v1alpha1.PeerRelayStatus{Endpoints: []v1alpha1.Endpoint{}, Replicas: []v1alpha1.ReplicaStatus{}}}
	podsReady := 0
	for i := range r.Replicas {
		ro := o.replica(r, i)
		s.replicas = append(s.replicas, ro)
		rs := v1alpha1.ReplicaStatus{Index: int32(i), Hostname: hostname(r.Hostname, i), PodReady: ro.podReady}
		for _, ep := range ro.endpoints {
			rs.Endpoints = append(rs.Endpoints, netip.AddrPortFrom(netip.MustParseAddr(ep.Address), uint16(ep.Port)).String())
		}
		sort.Strings(rs.Endpoints)
		s.status.Endpoints = append(s.status.Endpoints, ro.endpoints...)
		s.status.Replicas = append(s.status.Replicas, rs)
		if len(ro.endpoints) > 0 {
			s.withEndpoints++
		}
		if ro.podReady {
			podsReady++
		}
	}
	switch {
	case len(r.AWS.problems()) > 0:
		// Nothing changes for these replicas until the spec is fixed.
		s.reason = reasonAWSConfigInvalid
		s.msg = strings.Join(r.AWS.problems(), "; ") + " (fix spec.aws: these replicas keep what they had)"
	case o.authKey != "":
		s.reason, s.msg = reasonAuthKeyMissing, o.authKey
	case s.withEndpoints < r.Replicas:
		s.reason = reasonEndpointsPending
		s.msg = fmt.Sprintf("%d of %d replicas have a public address", s.withEndpoints, r.Replicas)
		if w := r.AWS.waits(); len(w) > 0 {
			s.msg += "; " + strings.Join(w, "; ")
		}
	case podsReady < r.Replicas:
		s.reason = reasonPodsPending
		s.msg = fmt.Sprintf("%d of %d relay pods are ready", podsReady, r.Replicas)
	default:
		s.ready = true
		s.reason = reasonReady
		s.msg = "all " + strconv.Itoa(r.Replicas) + " replicas are advertising their public endpoints"
	}
	return s
}
