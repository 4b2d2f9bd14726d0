package fn

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

func TestRelayConfig(t *testing.T) {
	want := func(p relayv1alpha1.RelayConfigParameters) *relayv1alpha1.RelayConfig {
		return &relayv1alpha1.RelayConfig{
			TypeMeta:   metav1.TypeMeta{APIVersion: "relay.peerrelay.io/v1alpha1", Kind: "RelayConfig"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-relay-1", Namespace: "team-a", Labels: labels1, Finalizers: []string{relayv1alpha1.Finalizer}},
			Spec: relayv1alpha1.RelayConfigSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
				ForProvider:         p,
			},
		}
	}
	base := relayv1alpha1.RelayConfigParameters{
		ServiceRef: &relayv1alpha1.LocalRef{Name: "my-relay-1"}, ConfigSecretName: "my-relay-1-config", StateSecretName: "my-relay-1",
		Hostname: "my-relay-1", Port: 41641, Tags: []string{"tag:k8s"}, Resolution: relayv1alpha1.ResolutionAuto,
		AuthKeySecretRef: &relayv1alpha1.AuthKeyRef{Name: "ts-auth", Key: "authkey", Mode: relayv1alpha1.AuthKeyModeFile, MountPath: "/etc/tailscale/authkey"},
	}
	cases := map[string]struct {
		reason string
		r      *relay
		want   *relayv1alpha1.RelayConfig
	}{
		"Default": {
			reason: "The replica's Service, config and state Secrets, hostname, port and tags; the key by file, never inline.",
			r:      testRelay(t),
			want:   want(base),
		},
		"Minted": {
			reason: "With no key Secret named the RelayConfig names none: the provider mints.",
			r:      testRelay(t, func(r *relay) { r.AuthKey = nil }),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.AuthKeySecretRef = nil
				return want(p)
			}(),
		},
		"HostPort": {
			reason: "A hostPort relay is advertised on its pod's node, on the relay's port.",
			r:      testRelay(t, func(r *relay) { r.Spec.HostPort = true }),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.Node = &relayv1alpha1.NodeEndpoint{Pod: "my-relay-1-0", Mode: relayv1alpha1.NodeModeHostPort}
				return want(p)
			}(),
		},
		"NodePort": {
			reason: "A NodePort relay is advertised on its pod's node, on the Service's node port.",
			r: testRelay(t, func(r *relay) {
				r.Spec.Service = &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeNodePort}
			}),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.Node = &relayv1alpha1.NodeEndpoint{Pod: "my-relay-1-0", Mode: relayv1alpha1.NodeModeNodePort}
				return want(p)
			}(),
		},
		"Tailnet": {
			reason: "spec.tailnet names the ClusterProviderConfig whose Tailscale API access the replica uses.",
			r: func() *relay {
				r, err := defaults(inputs{Name: "my-relay", Namespace: "team-a"}, v1alpha1.PeerRelaySpec{
					Replicas: ptr.To[int32](2), AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "ts-auth"}, Tailnet: "tailnet-b",
				}, &fnv1alpha1.Input{ProviderConfigName: "other"})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}(),
			want: func() *relayv1alpha1.RelayConfig {
				rc := want(base)
				rc.Spec.ProviderConfigReference.Name = "tailnet-b"
				return rc
			}(),
		},
		"Metrics": {
			reason: "With metrics on, the provider is told which pod and port serve the replica's relay counters, to sample them into status.",
			r:      testRelay(t, func(r *relay) { r.Spec.Metrics = &v1alpha1.Metrics{Enable: true} }),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.Traffic = &relayv1alpha1.TrafficSource{Pod: "my-relay-1-0", Port: 9002}
				return want(p)
			}(),
		},
		"Managed": {
			reason: "With a composed load balancer there is no Service to follow: the provider finds the load balancer by name and asks AWS.",
			r: testRelay(t, func(r *relay) {
				r.AWS = &awsPlan{Region: "eu-west-1", Managed: true, Replicas: []replicaPlan{{}, {Want: placementIDs{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b"}, LoadBalancerName: "my-relay-8cbd9d05549c138d-1"}}}
			}),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.ServiceRef, p.Resolution = nil, relayv1alpha1.ResolutionAWS
				p.AWS = &relayv1alpha1.AWSResolution{Region: "eu-west-1", SubnetID: "subnet-0b", AllocationID: "eipalloc-0b",
					LoadBalancerName: "my-relay-8cbd9d05549c138d-1"}
				return want(p)
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, relayConfig(tc.r, 1)); diff != "" {
				t.Errorf("%s\nRelayConfig (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
