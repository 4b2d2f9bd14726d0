package fn

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

func TestValidate(t *testing.T) {
	// Compared by type and field: the details are for people.
	byField := cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail", "Origin", "CoveredByDeclarative")
	cases := map[string]struct {
		reason  string
		spec    v1alpha1.PeerRelaySpec
		want    field.ErrorList
		awsOnly bool
	}{
		"Minimal": {reason: "The seed's minimal PeerRelay is valid.", spec: v1alpha1.PeerRelaySpec{Replicas: ptr.To[int32](1)}},
		"Everything": {
			reason: "Every problem is reported at once, each naming its field.",
			spec: v1alpha1.PeerRelaySpec{
				Replicas:         ptr.To[int32](101),
				Tags:             []v1alpha1.Tag{"k8s", "tag:a", "tag:a"},
				Port:             ptr.To[int32](0),
				AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "Bad_Name", Key: "a/b"},
				StaticEndpoints:  []string{"relay.example.com:1", "203.0.113.1:1", "203.0.113.1:1"},
			},
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), nil, ""),
				field.Invalid(field.NewPath("spec", "tags").Index(0), nil, ""),
				field.Duplicate(field.NewPath("spec", "tags").Index(2), nil),
				field.Invalid(field.NewPath("spec", "port"), nil, ""),
				field.Invalid(field.NewPath("spec", "authKeySecretRef", "name"), nil, ""),
				field.Invalid(field.NewPath("spec", "authKeySecretRef", "key"), nil, ""),
				field.Invalid(field.NewPath("spec", "staticEndpoints").Index(0), nil, ""),
				field.Duplicate(field.NewPath("spec", "staticEndpoints").Index(2), nil),
			},
		},
		"ServicePort": {
			reason: "spec.service.port is spec.port under the operator's name: the two may not disagree, and each is a port.",
			spec: v1alpha1.PeerRelaySpec{Port: ptr.To[int32](41641), Service: &v1alpha1.ServiceSpec{
				Port: ptr.To[int32](6969), IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicy("TripleStack")),
			}},
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "service", "port"), nil, ""),
				field.NotSupported[string](field.NewPath("spec", "service", "ipFamilyPolicy"), nil, nil),
			},
		},
		"ServicePortOutOfRange": {
			reason: "spec.service.port out of range names its own field.",
			spec:   v1alpha1.PeerRelaySpec{Service: &v1alpha1.ServiceSpec{Port: ptr.To[int32](70000)}},
			want:   field.ErrorList{field.Invalid(field.NewPath("spec", "service", "port"), nil, "")},
		},
		"ServicePortEqual": {
			reason: "Both set to one port is valid.",
			spec:   v1alpha1.PeerRelaySpec{Port: ptr.To[int32](6969), Service: &v1alpha1.ServiceSpec{Port: ptr.To[int32](6969)}},
		},
		"DisruptionBudget": {
			reason: "A budget of 0 (or 0%, or no percentage at all) would block every drain: refused, naming the field.",
			spec:   v1alpha1.PeerRelaySpec{DisruptionBudget: &v1alpha1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("0%"))}},
			want:   field.ErrorList{field.Invalid(field.NewPath("spec", "disruptionBudget", "maxUnavailable"), nil, "")},
		},
		"DisruptionBudgetZero": {
			reason: "maxUnavailable 0 is refused.",
			spec:   v1alpha1.PeerRelaySpec{DisruptionBudget: &v1alpha1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			want:   field.ErrorList{field.Invalid(field.NewPath("spec", "disruptionBudget", "maxUnavailable"), nil, "")},
		},
		"DisruptionBudgetPercent": {
			reason: "A percentage from 1% to 100% is valid.",
			spec:   v1alpha1.PeerRelaySpec{DisruptionBudget: &v1alpha1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))}},
		},
		"NodeModes": {
			reason: "hostPort and a NodePort Service each advertise the pod's node: not together, not with spec.aws; an unknown Service type is refused.",
			spec:   v1alpha1.PeerRelaySpec{HostPort: true, Service: &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeNodePort}},
			want: field.ErrorList{
				field.Forbidden(field.NewPath("spec", "hostPort"), ""),
			},
		},
		"NodePortWithAWS": {
			reason: "A NodePort Service has no load balancer for spec.aws to place.",
			spec:   v1alpha1.PeerRelaySpec{Service: &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeNodePort}, AWS: &v1alpha1.AWSSpec{Region: "eu-west-1"}},
			want:   field.ErrorList{field.Forbidden(field.NewPath("spec", "service", "type"), "")},
		},
		"ExternalName": {
			reason: "Service types other than LoadBalancer and NodePort are refused.",
			spec:   v1alpha1.PeerRelaySpec{Service: &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeExternalName}},
			want:   field.ErrorList{field.NotSupported[string](field.NewPath("spec", "service", "type"), nil, nil)},
		},
		"AWSOnly": {
			reason: "Problems only under spec.aws are AWS configuration problems.",
			spec: v1alpha1.PeerRelaySpec{Replicas: ptr.To[int32](2), AWS: &v1alpha1.AWSSpec{
				ElasticIPs:    []v1alpha1.ElasticIP{{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a", Allocate: true}},
				LoadBalancer:  "ALB",
				ZonePlacement: v1alpha1.ZonePlacementPerReplica,
			}},
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "aws", "elasticIPs"), nil, ""),
				field.Forbidden(field.NewPath("spec", "aws", "elasticIPs").Index(0).Child("allocationID"), ""),
				field.NotSupported[string](field.NewPath("spec", "aws", "loadBalancer"), nil, nil),
			},
			awsOnly: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, awsOnly := validate(&tc.spec)
			if diff := cmp.Diff(tc.want, got, byField, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nerrors (-want +got):\n%s", tc.reason, diff)
			}
			if awsOnly != tc.awsOnly {
				t.Errorf("%s\nawsOnly %v, want %v", tc.reason, awsOnly, tc.awsOnly)
			}
		})
	}
}

func TestImageTooOld(t *testing.T) {
	for image, old := range map[string]bool{
		"tailscale/tailscale:v1.102.5":                        false,
		"tailscale/tailscale:v1.110.0":                        false,
		"tailscale/tailscale:v1.98.2":                         true,
		"ghcr.io/tailscale/tailscale:v1.90.0@sha256:0123abcd": true,
		"registry.example:5000/tailscale:v1.80.1":             true,
		"registry.example:5000/tailscale":                     false, // no tag: cannot judge
		"tailscale/tailscale:latest":                          false,
		"tailscale/tailscale:unstable-v1.99.1":                false,
		"example/other-relay:v1.0.0":                          false,
	} {
		if got := imageTooOld(image) != ""; got != old {
			t.Errorf("imageTooOld(%q) = %v, want %v", image, got, old)
		}
	}
}
