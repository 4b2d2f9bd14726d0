package fn

import (
	"testing"

	xpresource "github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

func TestDisruptionBudget(t *testing.T) {
	want := func(mu intstr.IntOrString) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-relay", Namespace: "team-a", Labels: map[string]string{
				labelName: appName, labelInstance: "my-relay", labelManagedBy: "function-peerrelay",
			}},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: &mu,
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{labelName: appName, labelInstance: "my-relay"}},
			},
		}
	}
	cases := map[string]struct {
		reason string
		r      *relay
		want   *policyv1.PodDisruptionBudget
	}{
		"Default": {
			reason: "One replica at a time, over every relay pod of the PeerRelay and no other.",
			r:      testRelay(t),
			want:   want(intstr.FromInt32(1)),
		},
		"Percent": {
			reason: "spec.disruptionBudget.maxUnavailable is used as written.",
			r: testRelay(t, func(r *relay) {
				r.Spec.DisruptionBudget = &v1alpha1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))}
			}),
			want: want(intstr.FromString("50%")),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, disruptionBudget(tc.r)); diff != "" {
				t.Errorf("%s\nPodDisruptionBudget (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDisruptionBudgetDue(t *testing.T) {
	one, two := func(r *relay) { r.Replicas = 1 }, func(r *relay) { r.Replicas = 2 }
	pdb := observedState{observed: map[xpresource.Name]xpresource.ObservedComposed{keyDisruptionBudget: {Resource: composed.New()}}}
	cases := map[string]struct {
		reason string
		r      *relay
		obs    observedState
		pods   []bool // each replica's pod created
		want   bool
	}{
		"OneReplica": {
			reason: "A budget of one unavailable over a single replica protects nothing: not composed.",
			r:      testRelay(t, one), pods: []bool{true}, want: false,
		},
		"OneReplicaWithBudget": {
			reason: "A budget the spec sets is composed: the platform asked for it.",
			r: testRelay(t, one, func(r *relay) {
				r.Spec.DisruptionBudget = &v1alpha1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("100%"))}
			}),
			pods: []bool{true}, want: true,
		},
		"PodsBeingCreated": {
			reason: "While the StatefulSets create the pods its status would change with each: not composed yet.",
			r:      testRelay(t, two), pods: []bool{true, false}, want: false,
		},
		"PodsCreated": {
			reason: "Every pod created, ready or not (one may never be: then a drain must not take the other): composed.",
			r:      testRelay(t, two), pods: []bool{true, true}, want: true,
		},
		"Kept": {
			reason: "Once composed it stays while pods go: that is when it protects.",
			r:      testRelay(t, two), obs: pdb, pods: []bool{false, false}, want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var sum summary
			for _, created := range tc.pods {
				sum.replicas = append(sum.replicas, replicaObservation{podCreated: created})
			}
			if got := disruptionBudgetDue(tc.r, tc.obs, sum); got != tc.want {
				t.Errorf("%s\ndisruptionBudgetDue: want %v, got %v", tc.reason, tc.want, got)
			}
		})
	}
}
