// Package v1alpha1 holds the PeerRelay composite resource schema. One Go type
// serves both flavours: the Crossplane v2 namespaced XR (peerrelay.io) and the
// legacy cluster XR XPeerRelay with claim PeerRelay (legacy.peerrelay.io); the
// XRDs are generated from this package's CRD by hack/xrdgen.
// +kubebuilder:object:generate=true
// +groupName=peerrelay.io
// +versionName=v1alpha1
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group and versions of the v2 and legacy flavours.
const (
	Group       = "peerrelay.io"
	LegacyGroup = "legacy.peerrelay.io"
	Version     = "v1alpha1"
)

var (
	// GroupVersion of the Crossplane v2 namespaced PeerRelay.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// LegacyGroupVersion of the cluster XPeerRelay and its claim PeerRelay.
	LegacyGroupVersion = schema.GroupVersion{Group: LegacyGroup, Version: Version}

	// SchemeBuilder registers the PeerRelay type.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the PeerRelay type to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&PeerRelay{}, &PeerRelayList{})
}
