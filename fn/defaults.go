package fn

import (
	"fmt"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Labels Crossplane puts on a legacy XR to name its claim.
const (
	labelClaimName      = "crossplane.io/claim-name"
	labelClaimNamespace = "crossplane.io/claim-namespace"
)

// defaults applies, in order, the PeerRelay's own values, the Input's
// composition-level defaults and the built-in ones.
func defaults(in inputs, spec v1alpha1.PeerRelaySpec, fin *fnv1alpha1.Input) (*relay, error) {
	r := &relay{relaySpec: relaySpec{Name: in.Name, Namespace: in.Namespace, Spec: spec, Cloud: fin.Cloud}}
	if r.Namespace == "" {
		r.Legacy = true
		r.XRBase, _ = baseName(in.Name)
		// A legacy cluster XPeerRelay composes into its claim's namespace,
		// under its claim's name: the name the user wrote.
		r.Name, r.Namespace = in.ClaimName, in.ClaimNamespace
		if r.Name == "" || r.Namespace == "" {
			return nil, fmt.Errorf("metadata: a cluster-scoped XPeerRelay needs a claim (labels %s and %s): create a PeerRelay claim in a namespace instead", labelClaimName, labelClaimNamespace)
		}
	}
	r.Base, r.BaseReason = baseName(r.Name)

	r.Replicas = v1alpha1.DefaultReplicas
	if spec.Replicas != nil {
		r.Replicas = int(*spec.Replicas)
	}
	r.Port = v1alpha1.DefaultPort
	if fin.Port != nil {
		r.Port = *fin.Port
	}
	if spec.Port != nil {
		r.Port = *spec.Port
	}
	if spec.Service != nil && spec.Service.Port != nil {
		// The operator's name for spec.port; validate refuses the two
		// disagreeing.
		r.Port = *spec.Service.Port
	}
	switch {
	case len(spec.Tags) > 0:
		for _, t := range spec.Tags {
			r.Tags = append(r.Tags, string(t))
		}
	case len(fin.Tags) > 0:
		r.Tags = fin.Tags
	default:
		r.Tags = []string{v1alpha1.DefaultTag}
	}
	r.Image = v1alpha1.DefaultImage
	if fin.Image != "" {
		r.Image = fin.Image
	}
	r.Hostname = r.Base
	if spec.HostnamePrefix != "" {
		r.Hostname = spec.HostnamePrefix
	}
	if ref := spec.AuthKeySecretRef; ref != nil {
		r.AuthKey = &v1alpha1.SecretKeyRef{Name: ref.Name, Key: ref.Key}
		if r.AuthKey.Key == "" {
			r.AuthKey.Key = v1alpha1.DefaultAuthKeySecretKey
		}
	}
	r.ProviderConfig = providerConfigRef{Kind: relayv1alpha1.ClusterProviderConfigKind, Name: "default"}
	if fin.ProviderConfigKind != "" {
		r.ProviderConfig.Kind = fin.ProviderConfigKind
	}
	if fin.ProviderConfigName != "" {
		r.ProviderConfig.Name = fin.ProviderConfigName
	}
	if spec.Tailnet != "" {
		// A tailnet is a ClusterProviderConfig's Tailscale API access.
		r.ProviderConfig = providerConfigRef{Kind: relayv1alpha1.ClusterProviderConfigKind, Name: spec.Tailnet}
	}
	return r, nil
}
