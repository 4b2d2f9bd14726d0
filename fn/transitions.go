package fn

import (
	"fmt"
	"slices"
	"strings"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// transition is one replica's change between the status the PeerRelay
// carries and the one this call writes.
type transition struct {
	warning bool
	reason  v1alpha1.EventReason
	message string
}

// transitions compares each replica's status with the last one, by index:
// its load balancer got an address, its config advertises other endpoints,
// it became ready, or stopped being ready. Only a change yields one, so a
// replica at rest yields none; Kubernetes aggregates the same event
// repeated (a call that saw a status not yet written) into a count.
func transitions(last, now []v1alpha1.ReplicaStatus) []transition {
	var out []transition
	for _, r := range now {
		var was v1alpha1.ReplicaStatus
		if i := slices.IndexFunc(last, func(l v1alpha1.ReplicaStatus) bool { return l.Index == r.Index }); i >= 0 {
			was = last[i]
		}
		if r.LoadBalancerReady && !was.LoadBalancerReady {
			out = append(out, transition{reason: v1alpha1.EventLoadBalancerAddressed, message: fmt.Sprintf("replica %d: its load balancer has an address", r.Index)})
		}
		if len(r.Endpoints) > 0 && !slices.Equal(r.Endpoints, was.Endpoints) {
			out = append(out, transition{reason: v1alpha1.EventEndpointsChanged, message: fmt.Sprintf("replica %d's public endpoints are now %s", r.Index, strings.Join(r.Endpoints, ", "))})
		}
		switch {
		case r.Reachable == corev1.ConditionTrue && was.Reachable != corev1.ConditionTrue:
			out = append(out, transition{reason: v1alpha1.EventReplicaReachable, message: fmt.Sprintf("replica %d (%s): its endpoints answered the reachability probe", r.Index, r.Hostname)})
		case r.Reachable == corev1.ConditionFalse && was.Reachable != corev1.ConditionFalse:
			out = append(out, transition{warning: true, reason: v1alpha1.EventReplicaUnreachable, message: fmt.Sprintf("replica %d (%s): its endpoints did not answer the reachability probe", r.Index, r.Hostname)})
		}
		switch {
		case r.Ready && !was.Ready:
			out = append(out, transition{reason: v1alpha1.EventReplicaReady, message: fmt.Sprintf("replica %d (%s) is ready", r.Index, r.Hostname)})
		case !r.Ready && was.Ready:
			out = append(out, transition{warning: true, reason: v1alpha1.EventReplicaNotReady, message: fmt.Sprintf("replica %d (%s) is no longer ready: %s", r.Index, r.Hostname, r.Reason)})
		}
	}
	return out
}

// reportTransitions adds each transition as a result, which Crossplane
// records as an event on the PeerRelay (and its claim).
func reportTransitions(rsp *fnv1.RunFunctionResponse, ts []transition) {
	for _, t := range ts {
		var o *response.ResultOption
		if t.warning {
			o = response.Warning(rsp, fmt.Errorf("%s", t.message))
		} else {
			o = response.Normal(rsp, t.message)
		}
		o.WithReason(string(t.reason)).TargetCompositeAndClaim()
	}
}
