package fn

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

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

// replicaObservation is one replica as observed.
type replicaObservation struct {
	endpoints    []v1alpha1.Endpoint
	serviceReady bool // the Service has a load balancer ingress
	configReady  bool // the RelayConfig reports Ready
	podReady     bool
}

// enrolled tells whether every replica's device exists: its RelayConfig
// recorded the device ID containerboot wrote into the state Secret. The key
// is needed only to log in, so a key Secret deleted after that is no
// problem.
func (o observedState) enrolled(r *relay) bool {
	for i := range r.Replicas {
		rc, ok := o.get(relayConfigKey(i))
		if !ok {
			return false
		}
		if id, _ := rc.GetString("status.atProvider.deviceID"); id == "" {
			return false
		}
	}
	return true
}

func (o observedState) replica(r *relay, i int) replicaObservation {
	var ro replicaObservation
	if svc, ok := o.get(svcKey(i)); ok {
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
	if rc, ok := o.get(relayConfigKey(i)); ok {
		ro.configReady = isTrue(rc, managedReadyConditionTyp)
		// The provider's list is what the replica actually advertises
		// (resolved hostnames, AWS addresses, static endpoints), so it wins
		// over the bare ingress IPs.
		var eps []string
		if _ = rc.GetValueInto("status.atProvider.endpoints", &eps); len(eps) > 0 {
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
			ro.podReady = isTrue(p, podReadyConditionType)
		}
	default:
		if sts, ok := o.get(statefulSetKey(i)); ok {
			n, _ := sts.GetInteger("status.readyReplicas")
			ro.podReady = n >= 1
		}
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
		// A replica counts once its config advertises an address (its
		// RelayConfig is Ready), not when its load balancer has one.
		if len(ro.endpoints) > 0 && ro.configReady {
			s.withEndpoints++
		}
		if ro.podReady {
			podsReady++
		}
	}
	s.status.Addresses = addresses(s.status.Endpoints)
	switch {
	case len(r.AWS.problems()) > 0:
		// Nothing changes for these replicas until the spec is fixed.
		s.reason = reasonAWSConfigInvalid
		s.msg = strings.Join(r.AWS.problems(), "; ") + " (fix spec.aws: these replicas keep what they had)"
	case o.authKey != "" && !o.enrolled(r):
		s.reason, s.msg = reasonAuthKeyMissing, o.authKey
	case s.withEndpoints < r.Replicas:
		s.reason = reasonEndpointsPending
		s.msg = fmt.Sprintf("%d of %d replicas advertise a public address", s.withEndpoints, r.Replicas)
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

// addresses joins the distinct addresses of eps in order.
func addresses(eps []v1alpha1.Endpoint) string {
	seen := make(map[string]bool, len(eps))
	var out []string
	for _, ep := range eps {
		if !seen[ep.Address] {
			seen[ep.Address] = true
			out = append(out, ep.Address)
		}
	}
	return strings.Join(out, " ")
}
