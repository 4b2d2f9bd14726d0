package fn

import (
	"cmp"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// summary is the XR status and the PeerRelayReady condition.
type summary struct {
	status        v1alpha1.PeerRelayStatus
	replicas      []replicaObservation
	reason        xpv2.ConditionReason
	msg           string
	ready         bool
	withEndpoints int
}

func summarise(r *relay, o observedState) summary {
	s := summary{status: v1alpha1.PeerRelayStatus{Endpoints: []v1alpha1.Endpoint{}, Replicas: []v1alpha1.ReplicaStatus{}}}
	var n replicaCounts
	for i := range r.Replicas {
		ro := o.replica(r, i)
		s.replicas = append(s.replicas, ro)
		rs, advertised := replicaStatus(r, i, ro)
		s.status.Endpoints = append(s.status.Endpoints, ro.endpoints...)
		s.status.Replicas = append(s.status.Replicas, rs)
		n.count(rs, advertised)
	}
	s.withEndpoints = n.advertised
	s.status.Addresses = addresses(s.status.Endpoints)
	s.status.ReadyReplicas = fmt.Sprintf("%d/%d", n.ready, r.Replicas)
	if n.reachable+n.unreachable+n.unproven > 0 { // the provider probes
		s.status.ReachableReplicas = fmt.Sprintf("%d/%d", n.reachable, r.Replicas)
	}
	s.verdict(r, n)
	return s
}

// replicaCounts counts the replicas by what their status says.
type replicaCounts struct {
	advertised, podsReady, ready     int
	reachable, unreachable, unproven int
}

// count adds a replica. Only an answer that did not come counts against
// it: a probe that could not ask (Unknown: the prober cannot join, the
// relay allocated nothing) proves nothing either way, and neither does no
// condition yet (the probe just turned on): they are said, not counted.
func (n *replicaCounts) count(rs v1alpha1.ReplicaStatus, advertised bool) {
	if advertised {
		n.advertised++
	}
	if rs.PodReady {
		n.podsReady++
	}
	if rs.Ready {
		n.ready++
	}
	switch rs.Reachable {
	case corev1.ConditionTrue:
		n.reachable++
	case corev1.ConditionFalse:
		n.unreachable++
	case corev1.ConditionUnknown:
		n.unproven++
	}
}

// replicaStatus is replica i's status, and whether its config advertises
// an endpoint.
func replicaStatus(r *relay, i int, ro replicaObservation) (v1alpha1.ReplicaStatus, bool) {
	rs := v1alpha1.ReplicaStatus{Index: int32(i), Hostname: hostname(r.Hostname, i), PodReady: ro.podReady}
	rs.Zone = r.Pod.NodeSelector[corev1.LabelTopologyZone]
	if r.AWS != nil && r.AWS.Replicas[i].Zone != "" {
		rs.Zone = r.AWS.Replicas[i].Zone
	}
	if r.AWS != nil && r.AWS.Replicas[i].Use != nil {
		use := r.AWS.Replicas[i].Use
		rs.AWS = &v1alpha1.ReplicaAWSStatus{SubnetID: use.SubnetID, AllocationID: use.AllocationID}
	}
	for _, ep := range ro.endpoints {
		rs.Endpoints = append(rs.Endpoints, netip.AddrPortFrom(netip.MustParseAddr(ep.Address), uint16(ep.Port)).String())
	}
	sort.Strings(rs.Endpoints)
	// A replica counts once its config advertises an endpoint (its
	// RelayConfig is Ready), not when the load balancer has one. As in the
	// Tailscale operator, static endpoints alone count: a relay behind a
	// port forward has no load balancer of its own.
	advertised := len(ro.endpoints) > 0 && ro.configReady && len(ro.awsPending) == 0
	rs.LoadBalancerReady = ro.serviceReady || ro.lbAddress
	if t := ro.traffic; t != nil && r.metrics() {
		rs.Traffic = &v1alpha1.ReplicaTraffic{Sessions: t.Sessions, ForwardedPackets: t.ForwardedPackets, ForwardedBytes: t.ForwardedBytes, SampledAt: t.SampledAt}
	}
	rs.Reachable = ro.reachable.Status
	rs.Ready = advertised && ro.podReady && rs.Reachable != corev1.ConditionFalse
	rs.Reason = replicaWaits(ro, r.nodeMode() != "", rs.LoadBalancerReady || ro.staticOnly || ro.nodeAddress, advertised)
	return rs, advertised
}

// verdict sets PeerRelayReady's reason and message, first things first.
func (s *summary) verdict(r *relay, n replicaCounts) {
	keyReason, keyMsg := s.keyProblem()
	tailnet := s.tailnetProblem(r)
	switch {
	case len(r.AWS.problems()) > 0:
		// Nothing changes for these replicas until the spec is fixed.
		s.reason = v1alpha1.ReasonAWSConfigInvalid
		s.msg = strings.Join(r.AWS.problems(), "; ") + " (fix spec.aws: these replicas keep what they had)"
	case tailnet != "":
		s.reason, s.msg = v1alpha1.ReasonTailnetUnavailable, tailnet
	case keyReason != "":
		s.reason, s.msg = keyReason, keyMsg
	case n.advertised < r.Replicas:
		s.reason = v1alpha1.ReasonEndpointsPending
		s.msg = fmt.Sprintf("%d of %d replicas advertise a public address", n.advertised, r.Replicas)
		if w := r.AWS.waits(); len(w) > 0 {
			s.msg += "; " + strings.Join(w, "; ")
		}
	case n.podsReady < r.Replicas:
		s.reason = v1alpha1.ReasonPodsPending
		s.msg = fmt.Sprintf("%d of %d relay pods are ready", n.podsReady, r.Replicas)
	case n.unreachable > 0:
		s.reason = v1alpha1.ReasonEndpointsUnreachable
		s.msg = fmt.Sprintf("%d of %d replicas answered the provider's reachability probe", n.reachable, r.Replicas) + s.probed(corev1.ConditionFalse) + s.probed(corev1.ConditionUnknown)
	default:
		s.ready = true
		s.reason = v1alpha1.ReasonReady
		s.msg = "all " + strconv.Itoa(r.Replicas) + " replicas are advertising their public endpoints"
		if n.unproven > 0 {
			s.msg += fmt.Sprintf("; the reachability probe could not tell for %d of them", n.unproven) + s.probed(corev1.ConditionUnknown)
		}
		s.msg += s.internalNodes()
	}
}

// replicaWaits says what a replica that is not ready waits for, first
// things first; "" when it is ready.
func replicaWaits(ro replicaObservation, onNode, addressed, advertised bool) string {
	switch {
	case ro.key.Status == corev1.ConditionFalse && ro.key.Reason != relayv1alpha1.ReasonKeyMinting:
		return string(ro.key.Reason) + ": " + ro.key.Message
	case !addressed && onNode:
		return "waiting for its node's address (its pod scheduled on a node with one)"
	case !addressed:
		return "waiting for its load balancer's address"
	case len(ro.awsPending) > 0:
		return "waiting for its AWS resources to be Ready: " + strings.Join(ro.awsPending, ", ")
	case !advertised:
		return "waiting for its config to advertise its address"
	case !ro.podReady:
		return "waiting for its pod to be ready"
	case ro.reachable.Status == corev1.ConditionFalse:
		return string(ro.reachable.Reason) + ": " + ro.reachable.Message
	}
	return ""
}

// internalNodes names the replicas advertised on their node's InternalIP
// (the node has no ExternalIP): ready, but reachable only where that
// network is routed.
func (s summary) internalNodes() string {
	var idx []string
	for i, ro := range s.replicas {
		if ro.nodeInternal {
			idx = append(idx, strconv.Itoa(i))
		}
	}
	if len(idx) == 0 {
		return ""
	}
	if len(idx) == 1 {
		return fmt.Sprintf("; replica %s advertises its node's InternalIP (the node has no ExternalIP): peers reach it only where that network is routed", idx[0])
	}
	return fmt.Sprintf("; replicas %s advertise their nodes' InternalIPs (the nodes have no ExternalIP): peers reach them only where that network is routed", strings.Join(idx, ", "))
}

// probed names the replicas whose Reachable condition has status st, and
// why.
func (s summary) probed(st corev1.ConditionStatus) string {
	var b strings.Builder
	for i, ro := range s.replicas {
		if ro.reachable.Status == st {
			fmt.Fprintf(&b, "; replica %d: %s: %s", i, ro.reachable.Reason, ro.reachable.Message)
		}
	}
	return b.String()
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

// keyProblem is AuthKeySecretMissing, NoAuthKey, AuthKeyRejected or
// MintBudgetSpent, with which replicas cannot log in and why, when some
// replica cannot; reason is "" otherwise. The provider reports them only while a replica still
// has to log in, and reads the key Secret itself: the function requires
// no Secret, so Crossplane caches none for it.
func (s summary) keyProblem() (reason xpv2.ConditionReason, msg string) {
	var msgs []string
	replicas := map[string][]string{}
	for i, ro := range s.replicas {
		switch ro.key.Reason {
		case relayv1alpha1.ReasonKeySecretMissing, relayv1alpha1.ReasonKeyUnavailable, relayv1alpha1.ReasonKeyRejected, relayv1alpha1.ReasonMintBudgetSpent:
		default:
			continue
		}
		if ro.key.Status != corev1.ConditionFalse {
			continue
		}
		reason = cmp.Or(reason, ro.key.Reason)
		if _, seen := replicas[ro.key.Message]; !seen {
			msgs = append(msgs, ro.key.Message)
		}
		replicas[ro.key.Message] = append(replicas[ro.key.Message], strconv.Itoa(i))
	}
	// One line per message: every replica of a PeerRelay usually has the
	// same problem.
	out := make([]string, len(msgs))
	for i, m := range msgs {
		which := "replica "
		if len(replicas[m]) > 1 {
			which = "replicas "
		}
		out[i] = which + strings.Join(replicas[m], ", ") + ": " + m
	}
	return reason, strings.Join(out, "; ")
}

// devicesStay is the DeviceCleanup=False a replica's RelayConfig reports
// (its device would stay in the tailnet), if any.
func (s summary) devicesStay() (xpv2.Condition, bool) {
	for _, ro := range s.replicas {
		if ro.cleanup.Status == corev1.ConditionFalse {
			return ro.cleanup, true
		}
	}
	return xpv2.Condition{}, false
}

// tailnetProblem says why the provider cannot use the provider config:
// its policy leaves the namespace out, or it cannot read the
// ClusterProviderConfig spec.tailnet names; from the RelayConfigs'
// ProviderConfigUsable condition, or "".
func (s summary) tailnetProblem(r *relay) string {
	for _, ro := range s.replicas {
		c := ro.providerConfig
		switch {
		case c.Status != corev1.ConditionFalse:
		case c.Reason == relayv1alpha1.ReasonPolicyDenied:
			return c.Message + " (ask the platform team to allow this namespace, or name another tailnet in spec.tailnet)"
		case r.Spec.Tailnet != "":
			return fmt.Sprintf("spec.tailnet %q: %s (create ClusterProviderConfig %s with spec.tailscale, the tailnet's OAuth client)", r.Spec.Tailnet, c.Message, r.Spec.Tailnet)
		}
	}
	return ""
}

// setStatus writes status.endpoints, status.replicas and status.addresses
// on the desired XR, keeping whatever earlier steps put there, and states
// the XR's readiness.
func setStatus(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, sum summary) error {
	st := sum.status
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
	for f, empty := range map[string]any{"endpoints": []any{}, "replicas": []any{}, "addresses": "", "readyReplicas": "", "reachableReplicas": ""} {
		if err := dxr.Resource.SetValue("status."+f, cmp.Or(m[f], empty)); err != nil {
			return fmt.Errorf("cannot set status.%s: %w", f, err)
		}
	}
	// The XR is Ready exactly when PeerRelayReady is True: every replica
	// has an endpoint and a ready pod.
	dxr.Ready = resource.ReadyFalse
	if sum.ready {
		dxr.Ready = resource.ReadyTrue
	}
	return response.SetDesiredCompositeResource(rsp, dxr)
}
