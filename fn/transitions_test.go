package fn

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

func TestTransitions(t *testing.T) {
	ready := v1alpha1.ReplicaStatus{Index: 0, Hostname: "r-0", Endpoints: []string{"203.0.113.10:41641"}, LoadBalancerReady: true, PodReady: true, Ready: true}
	waiting := v1alpha1.ReplicaStatus{Index: 0, Hostname: "r-0", Reason: "waiting for its load balancer's address"}
	moved := ready
	moved.Endpoints = []string{"203.0.113.20:41641"}
	podDown := ready
	podDown.PodReady, podDown.Ready, podDown.Reason = false, false, "waiting for its pod to be ready"
	reachable := ready
	reachable.Reachable = corev1.ConditionTrue
	unreachable := ready
	unreachable.Reachable, unreachable.Ready, unreachable.Reason = corev1.ConditionFalse, false, "NoAnswer: no advertised endpoint answered"
	cases := map[string]struct {
		reason    string
		last, now []v1alpha1.ReplicaStatus
		want      []transition
	}{
		"AtRest": {
			reason: "Nothing changed: no event, so a replica at rest records nothing.",
			last:   []v1alpha1.ReplicaStatus{ready}, now: []v1alpha1.ReplicaStatus{ready},
		},
		"New": {
			reason: "A replica that became ready says each step once: address, endpoints, ready.",
			last:   []v1alpha1.ReplicaStatus{waiting}, now: []v1alpha1.ReplicaStatus{ready},
			want: []transition{
				{reason: v1alpha1.EventLoadBalancerAddressed, message: "replica 0: its load balancer has an address"},
				{reason: v1alpha1.EventEndpointsChanged, message: "replica 0's public endpoints are now 203.0.113.10:41641"},
				{reason: v1alpha1.EventReplicaReady, message: "replica 0 (r-0) is ready"},
			},
		},
		"NewAddress": {
			reason: "A new load balancer address is advertised: one event naming it.",
			last:   []v1alpha1.ReplicaStatus{ready}, now: []v1alpha1.ReplicaStatus{moved},
			want: []transition{{reason: v1alpha1.EventEndpointsChanged, message: "replica 0's public endpoints are now 203.0.113.20:41641"}},
		},
		"NotReady": {
			reason: "A replica that stops being ready is a Warning saying what it waits for.",
			last:   []v1alpha1.ReplicaStatus{ready}, now: []v1alpha1.ReplicaStatus{podDown},
			want: []transition{{warning: true, reason: v1alpha1.EventReplicaNotReady, message: "replica 0 (r-0) is no longer ready: waiting for its pod to be ready"}},
		},
		"Unreachable": {
			reason: "A replica whose endpoints stop answering the probe is a Warning, and no longer ready.",
			last:   []v1alpha1.ReplicaStatus{reachable}, now: []v1alpha1.ReplicaStatus{unreachable},
			want: []transition{
				{warning: true, reason: v1alpha1.EventReplicaUnreachable, message: "replica 0 (r-0): its endpoints did not answer the reachability probe"},
				{warning: true, reason: v1alpha1.EventReplicaNotReady, message: "replica 0 (r-0) is no longer ready: NoAnswer: no advertised endpoint answered"},
			},
		},
		"ReachableAgain": {
			reason: "Answering again says so once, and ready again.",
			last:   []v1alpha1.ReplicaStatus{unreachable}, now: []v1alpha1.ReplicaStatus{reachable},
			want: []transition{
				{reason: v1alpha1.EventReplicaReachable, message: "replica 0 (r-0): its endpoints answered the reachability probe"},
				{reason: v1alpha1.EventReplicaReady, message: "replica 0 (r-0) is ready"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, transitions(tc.last, tc.now), cmp.AllowUnexported(transition{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRunFunctionReportsTransitions: a transition reaches the response as
// a result with its reason, for the PeerRelay and its claim.
func TestRunFunctionReportsTransitions(t *testing.T) {
	rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 1"), Resources: map[string]*fnv1.Resource{
		"service-0": observedRes(t, svcWithIP("203.0.113.10")),
	}}})
	var got []string
	for _, r := range rsp.GetResults() {
		got = append(got, r.GetSeverity().String()+" "+r.GetReason()+" "+r.GetTarget().String()+": "+r.GetMessage())
	}
	want := []string{
		"SEVERITY_NORMAL LoadBalancerAddressed TARGET_COMPOSITE_AND_CLAIM: replica 0: its load balancer has an address",
		"SEVERITY_NORMAL EndpointsChanged TARGET_COMPOSITE_AND_CLAIM: replica 0's public endpoints are now 203.0.113.10:41641",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results -want +got:\n%s", diff)
	}
}
