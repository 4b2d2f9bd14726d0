package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// TestDefaults: the PeerRelay's own values win over the Input's
// composition-level defaults, which win over the built-in ones.
func TestDefaults(t *testing.T) {
	type want struct {
		name, namespace, hostname string
		port                      int32
		tags                      []string
		image                     string
		providerConfig            providerConfigRef
		authKey                   *v1alpha1.SecretKeyRef
		err                       string // a substring; "" for none
	}
	builtIn := want{name: "my-relay", namespace: "team-a", hostname: "my-relay", port: v1alpha1.DefaultPort, tags: []string{v1alpha1.DefaultTag},
		image: v1alpha1.DefaultImage, providerConfig: providerConfigRef{Kind: relayv1alpha1.ClusterProviderConfigKind, Name: "default"}}
	with := func(f func(*want)) want { w := builtIn; f(&w); return w }
	input := &fnv1alpha1.Input{Port: ptr.To[int32](3478), Tags: []string{"tag:platform"}, Image: "registry.example/tailscale:v1.102.5",
		ProviderConfigKind: relayv1alpha1.ProviderConfigKind, ProviderConfigName: "team"}
	cases := map[string]struct {
		reason string
		xr     inputs
		spec   v1alpha1.PeerRelaySpec
		in     *fnv1alpha1.Input
		want   want
	}{
		"BuiltIn": {
			reason: "An empty spec and Input get the built-in defaults.",
			xr:     inputs{Name: "my-relay", Namespace: "team-a"},
			in:     &fnv1alpha1.Input{},
			want:   builtIn,
		},
		"Input": {
			reason: "The Input's values replace the built-in ones.",
			xr:     inputs{Name: "my-relay", Namespace: "team-a"},
			in:     input,
			want: with(func(w *want) {
				w.port, w.tags, w.image = 3478, []string{"tag:platform"}, input.Image
				w.providerConfig = providerConfigRef{Kind: relayv1alpha1.ProviderConfigKind, Name: "team"}
			}),
		},
		"Spec": {
			reason: "The PeerRelay's values replace the Input's; a tailnet names a ClusterProviderConfig whatever the Input says; a key Secret's key defaults.",
			xr:     inputs{Name: "my-relay", Namespace: "team-a"},
			spec: v1alpha1.PeerRelaySpec{Port: ptr.To[int32](41000), Tags: []v1alpha1.Tag{"tag:relay-a"}, Tailnet: "tailnet-b",
				HostnamePrefix: "edge", AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "ts-auth"}},
			in: input,
			want: with(func(w *want) {
				w.port, w.tags, w.image, w.hostname = 41000, []string{"tag:relay-a"}, input.Image, "edge"
				w.providerConfig = providerConfigRef{Kind: relayv1alpha1.ClusterProviderConfigKind, Name: "tailnet-b"}
				w.authKey = &v1alpha1.SecretKeyRef{Name: "ts-auth", Key: v1alpha1.DefaultAuthKeySecretKey}
			}),
		},
		"ServicePort": {
			reason: "spec.service.port, the Tailscale operator's name for the port, sets it as spec.port does.",
			xr:     inputs{Name: "my-relay", Namespace: "team-a"},
			spec:   v1alpha1.PeerRelaySpec{Service: &v1alpha1.ServiceSpec{Port: ptr.To[int32](6969)}},
			in:     input,
			want: with(func(w *want) {
				w.port, w.tags, w.image = 6969, []string{"tag:platform"}, input.Image
				w.providerConfig = providerConfigRef{Kind: relayv1alpha1.ProviderConfigKind, Name: "team"}
			}),
		},
		"LegacyClaim": {
			reason: "A cluster-scoped XPeerRelay composes into its claim's namespace, under its claim's name.",
			xr:     inputs{Name: "my-relay-x7k2p", ClaimName: "my-relay", ClaimNamespace: "team-a"},
			in:     &fnv1alpha1.Input{},
			want:   builtIn,
		},
		"LegacyWithoutClaim": {
			reason: "A cluster-scoped XPeerRelay without a claim is refused, naming the labels it lacks.",
			xr:     inputs{Name: "my-relay-x7k2p"},
			in:     &fnv1alpha1.Input{},
			want:   want{err: labelClaimName},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := defaults(tc.xr, tc.spec, tc.in)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nerror %v, want one containing %q", tc.reason, err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			got := want{name: r.Name, namespace: r.Namespace, hostname: r.Hostname, port: r.Port, tags: r.Tags, image: r.Image,
				providerConfig: r.ProviderConfig, authKey: r.AuthKey}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\ndefaults (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
