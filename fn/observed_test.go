package fn

import (
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// TestPodsNotSuppliedKeepLastReadiness: on a call without the pods (the
// requirement not resolved yet), a replica's readiness is what the
// PeerRelay already says, not the StatefulSet's readyReplicas, which lags
// the pod: PeerRelayReady must not flip and back within one reconcile.
func TestPodReadiness(t *testing.T) {
	sts := func(ready int) resource.ObservedComposed {
		u := composed.New()
		u.SetAPIVersion("apps/v1")
		u.SetKind("StatefulSet")
		_ = u.SetValue("status.readyReplicas", ready)
		return resource.ObservedComposed{Resource: u}
	}
	pod := func(ready string) map[string]*composed.Unstructured {
		u := composed.New()
		_ = u.SetValue("status.conditions", []any{map[string]any{"type": "Ready", "status": ready}})
		return map[string]*composed.Unstructured{"my-relay-0-0": u}
	}
	managed := func(r *relay) { r.Spec.AWS = &v1alpha1.AWSSpec{LoadBalancer: v1alpha1.LoadBalancerManaged} }
	said := func(ready bool) v1alpha1.PeerRelayStatus {
		return v1alpha1.PeerRelayStatus{Replicas: []v1alpha1.ReplicaStatus{{Index: 0, PodReady: ready}}}
	}
	cases := map[string]struct {
		reason string
		r      *relay
		obs    observedState
		want   bool
	}{
		"StatefulSetReady": {
			reason: "Pods not required: a ready StatefulSet means a ready pod, whatever the PeerRelay said before.",
			r:      testRelay(t),
			obs:    observedState{observed: map[resource.Name]resource.ObservedComposed{"statefulset-0": sts(1)}, last: said(false)},
			want:   true,
		},
		"StatefulSetNotReady": {
			reason: "Pods not required: the StatefulSet's count wins over the PeerRelay's last status, or a pod that went unready would stay ready.",
			r:      testRelay(t),
			obs:    observedState{observed: map[resource.Name]resource.ObservedComposed{"statefulset-0": sts(0)}, last: said(true)},
			want:   false,
		},
		"PodSupplied": {
			reason: "Pods required and supplied: the pod's Ready condition wins over the StatefulSet's lagging count.",
			r:      testRelay(t, managed),
			obs:    observedState{observed: map[resource.Name]resource.ObservedComposed{"statefulset-0": sts(0)}, pods: pod("True"), podsRequired: true},
			want:   true,
		},
		"PodsNotSuppliedKeepLast": {
			reason: "Pods required but not supplied in this call: keep what the PeerRelay says, or every reconcile flips.",
			r:      testRelay(t, managed),
			obs:    observedState{observed: map[resource.Name]resource.ObservedComposed{"statefulset-0": sts(0)}, podsRequired: true, last: said(true)},
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.obs.replica(tc.r, 0).podReady; got != tc.want {
				t.Errorf("%s\npodReady: got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestTTL: a ready PeerRelay is composed again after ttlReady, unless
// Crossplane's watch circuit breaker is open on it: then a change it drops
// (a scale, say) must not wait an hour for the next requeue, nor does a
// ready PeerRelay re-apply everything every ttlPending at rest.
func TestTTL(t *testing.T) {
	ready := map[string]string{"service-0": svcWithIP("203.0.113.10"), "relayconfig-0": relayCfg("True", "203.0.113.10:41641"), "statefulset-0": sts(1)}
	cases := map[string]struct {
		reason   string
		observed map[string]string
		status   string
		want     time.Duration
	}{
		"Pending": {
			reason: "A PeerRelay that is not ready comes back soon.",
			want:   ttlPending,
		},
		"Ready": {
			reason:   "A ready PeerRelay comes back after ttlReady.",
			observed: ready,
			want:     ttlReady,
		},
		"ReadyBreakerOpen": {
			reason:   "A ready PeerRelay whose watch circuit breaker is open comes back within a minute, not every 15 s: Crossplane drops some of its watch events.",
			observed: ready,
			status:   `conditions: [{type: Responsive, status: "False", reason: WatchCircuitOpen, lastTransitionTime: "2026-01-01T00:00:00Z"}]`,
			want:     ttlUnheard,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := map[string]*fnv1.Resource{}
			for k, y := range tc.observed {
				obs[k] = observedRes(t, y)
			}
			comp := xr(t, "replicas: 1")
			if tc.status != "" {
				comp = &fnv1.Resource{Resource: mustStruct(t, "apiVersion: peerrelay.io/v1alpha1\nkind: PeerRelay\nmetadata: {name: my-relay, namespace: team-a}\nspec:\n  replicas: 1\nstatus:\n  "+tc.status)}
			}
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: comp, Resources: podAccess(t, obs)}})
			if got := rsp.GetMeta().GetTtl().AsDuration(); got != tc.want {
				t.Errorf("%s\nTTL %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
