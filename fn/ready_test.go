package fn

import (
	"testing"

	xpresource "github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

func TestServiceReadiness(t *testing.T) {
	obs := observedState{observed: map[xpresource.Name]xpresource.ObservedComposed{"service-0": {Resource: composed.New()}}}
	sum := summary{replicas: []replicaObservation{{}}} // no ingress
	cases := map[string]struct {
		reason string
		r      *relay
		want   xpresource.Ready
	}{
		"LoadBalancer": {reason: "A LoadBalancer Service is ready once it has an ingress.", r: testRelay(t), want: xpresource.ReadyFalse},
		"Managed": {
			reason: "With load balancers composed as managed resources the Service is a ClusterIP that never gets an ingress: ready once it exists, or the XR is never Ready.",
			r:      testRelay(t, func(r *relay) { r.Spec.AWS = &v1alpha1.AWSSpec{LoadBalancer: v1alpha1.LoadBalancerManaged} }),
			want:   xpresource.ReadyTrue,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := readiness("service-0", tc.r, obs, sum); got != tc.want {
				t.Errorf("%s\nreadiness %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
