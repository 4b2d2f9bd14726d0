package fn

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

func TestPodsRequiredOnlyForManagedLoadBalancers(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   string
		want   bool
	}{
		"Default": {
			reason: "Without managed load balancers nothing needs a pod's IP: no pods are asked for, so Crossplane neither watches nor caches Pods for this PeerRelay.",
			spec:   "replicas: 1",
		},
		"Managed": {
			reason: "Managed load balancers register pod IPs as targets: the pods are asked for.",
			spec:   "replicas: 1\naws: {region: eu-west-1, loadBalancer: Managed, elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0a}]}",
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := "apiVersion: peerrelay.io/v1alpha1\nkind: PeerRelay\nmetadata: {name: my-relay, namespace: team-a}\nspec:\n  " + strings.ReplaceAll(tc.spec, "\n", "\n  ")
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, xr)}}})
			if _, got := rsp.GetRequirements().GetResources()[requiredPodsKey]; got != tc.want {
				t.Errorf("%s\npods required: got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
