package fn

import (
	"testing"

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
