package fn

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEIPUsage(t *testing.T) {
	use := &placementIDs{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b"}
	cases := map[string]struct {
		reason string
		plan   awsPlan
		want   map[string]any // spec.by; nil: no Usage
	}{
		"ServiceHoldsTheEIP": {
			reason: "The AWS Load Balancer Controller's NLB holds the allocated EIP for as long as the replica's Service exists.",
			plan:   awsPlan{Region: "eu-west-1", Replicas: []replicaPlan{{}, {Allocate: true, Use: use}}},
			want:   map[string]any{"apiVersion": "v1", "kind": "Service", "resourceRef": map[string]any{"name": "my-relay-1"}},
		},
		"LoadBalancerHoldsTheEIP": {
			reason: "With loadBalancer: Managed the composed NLB holds it.",
			plan:   awsPlan{Region: "eu-west-1", Managed: true, Replicas: []replicaPlan{{}, {Allocate: true, Use: use}}},
			want:   map[string]any{"apiVersion": "elbv2.aws.m.upbound.io/v1beta1", "kind": "LB", "resourceRef": map[string]any{"name": "my-relay-1"}},
		},
		"NotAllocated": {
			reason: "An Elastic IP the user owns is not ours to protect.",
			plan:   awsPlan{Region: "eu-west-1", Replicas: []replicaPlan{{}, {Use: use}}},
		},
		"NotUsedYet": {
			reason: "Before its check the EIP has no user: no Usage yet.",
			plan:   awsPlan{Region: "eu-west-1", Replicas: []replicaPlan{{}, {Allocate: true}}},
		},
		"Legacy": {
			reason: "A legacy claim's EIP is cluster-scoped: a namespaced Usage cannot name it.",
			plan:   awsPlan{Region: "eu-west-1", Legacy: true, XRBase: "my-relay-x", Replicas: []replicaPlan{{}, {Allocate: true, Use: use}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRelay(t, func(r *relay) { r.AWS = &tc.plan })
			got, ok := eipUsage(r, 1)
			if ok != (tc.want != nil) {
				t.Fatalf("%s\ncomposed a Usage: %v", tc.reason, ok)
			}
			if !ok {
				return
			}
			u := got.obj.(interface{ UnstructuredContent() map[string]any }).UnstructuredContent()
			spec := u["spec"].(map[string]any)
			if diff := cmp.Diff(tc.want, spec["by"]); diff != "" {
				t.Errorf("%s\nspec.by (-want +got):\n%s", tc.reason, diff)
			}
			wantOf := map[string]any{"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": "EIP", "resourceRef": map[string]any{"name": "my-relay-1"}}
			if diff := cmp.Diff(wantOf, spec["of"]); diff != "" || spec["replayDeletion"] != true || got.key != "usage-eip-1" {
				t.Errorf("%s\nkey %s, spec.of (-want +got):\n%s, replayDeletion %v", tc.reason, got.key, diff, spec["replayDeletion"])
			}
		})
	}
}
