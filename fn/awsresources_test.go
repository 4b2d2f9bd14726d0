package fn

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
)

// TestComposeAWS: a replica's AWS managed resources are composed in
// stages, each once what it needs is known, as the kinds and scope the XR
// calls for.
func TestComposeAWS(t *testing.T) {
	use := &placementIDs{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a"}
	cases := map[string]struct {
		reason  string
		plan    awsPlan
		want    []string // key kind apiVersion namespace
		wantRef map[string]any
	}{
		"ServiceOnly": {
			reason: "Without managed load balancers only a new Elastic IP is composed.",
			plan:   awsPlan{Region: "eu-west-1", Replicas: []replicaPlan{{Allocate: true}}},
			want:   []string{"eip-0 EIP ec2.aws.m.upbound.io/v1beta1 team-a"},
		},
		"ManagedWaitsForPlacement": {
			reason: "A managed load balancer waits for a checked placement, its target group for the subnet's VPC.",
			plan:   awsPlan{Region: "eu-west-1", Managed: true, Replicas: []replicaPlan{{Allocate: true}}},
			want:   []string{"eip-0 EIP ec2.aws.m.upbound.io/v1beta1 team-a"},
		},
		"ManagedComplete": {
			reason: "With the placement, the VPC and the pod's IP known, everything is composed, the listener last.",
			plan:   awsPlan{Region: "eu-west-1", Managed: true, Replicas: []replicaPlan{{Use: use, VPCID: "vpc-0a", PodIP: "10.0.1.7"}}},
			want: []string{
				"lb-0 LB elbv2.aws.m.upbound.io/v1beta1 team-a",
				"targetgroup-0 LBTargetGroup elbv2.aws.m.upbound.io/v1beta1 team-a",
				"target-0-10-0-1-7 LBTargetGroupAttachment elbv2.aws.m.upbound.io/v1beta1 team-a",
				"listener-0 LBListener elbv2.aws.m.upbound.io/v1beta1 team-a",
			},
			wantRef: map[string]any{"name": "my-relay-0", "namespace": "team-a"},
		},
		"Legacy": {
			reason: "A cluster-scoped XPeerRelay composes the cluster-scoped kinds, named after the XR, with a providerConfigRef without a kind.",
			plan: awsPlan{Region: "eu-west-1", Legacy: true, XRBase: "my-relay-x7k2p", ProviderConfig: &fnv1alpha1.AWSProviderConfigRef{Name: "aws"},
				Replicas: []replicaPlan{{Allocate: true}}},
			want: []string{"eip-0 EIP ec2.aws.upbound.io/v1beta1 "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRelay(t)
			plan := tc.plan
			r.AWS = &plan
			var got []string
			var objs []*unstructured.Unstructured
			for _, o := range composeAWS(r, 0) {
				u := o.obj.(*unstructured.Unstructured)
				objs = append(objs, u)
				got = append(got, o.key+" "+u.GetKind()+" "+u.GetAPIVersion()+" "+u.GetNamespace())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncomposed (-want +got):\n%s", tc.reason, diff)
			}
			for _, u := range objs {
				if region, _, _ := unstructured.NestedString(u.Object, "spec", "forProvider", "region"); region != "eu-west-1" {
					t.Errorf("%s\n%s: region %q", tc.reason, u.GetKind(), region)
				}
				if tc.plan.Legacy {
					if pc, _, _ := unstructured.NestedStringMap(u.Object, "spec", "providerConfigRef"); !cmp.Equal(pc, map[string]string{"name": "aws"}) {
						t.Errorf("%s\n%s: providerConfigRef %v", tc.reason, u.GetKind(), pc)
					}
					if u.GetName() != "my-relay-x7k2p-0" {
						t.Errorf("%s\n%s: name %q, want the XR's", tc.reason, u.GetKind(), u.GetName())
					}
				}
				if u.GetKind() == "LBListener" {
					if got, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider", "loadBalancerArnRef"); !cmp.Equal(got, tc.wantRef) {
						t.Errorf("%s\nlistener's loadBalancerArnRef %v, want %v", tc.reason, got, tc.wantRef)
					}
				}
			}
		})
	}
}
