// Package v1alpha1 holds provider-peerrelay's managed resources and provider
// configs: RelayConfig, ProviderConfig, ClusterProviderConfig and their usages.
// +kubebuilder:object:generate=true
// +groupName=relay.peerrelay.io
// +versionName=v1alpha1
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group of the provider's resources.
const (
	Group   = "relay.peerrelay.io"
	Version = "v1alpha1"
)

var (
	// GroupVersion of the provider's resources.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the provider's types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the provider's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kinds, for references and GVKs.
var (
	RelayConfigKind                         = "RelayConfig"
	RelayConfigGroupVersionKind             = GroupVersion.WithKind(RelayConfigKind)
	ProviderConfigKind                      = "ProviderConfig"
	ProviderConfigGroupVersionKind          = GroupVersion.WithKind(ProviderConfigKind)
	ClusterProviderConfigKind               = "ClusterProviderConfig"
	ProviderConfigUsageGroupVersionKind     = GroupVersion.WithKind("ProviderConfigUsage")
	ProviderConfigUsageListGroupVersionKind = GroupVersion.WithKind("ProviderConfigUsageList")
)

func init() {
	SchemeBuilder.Register(
		&RelayConfig{}, &RelayConfigList{},
		&ProviderConfig{}, &ProviderConfigList{},
		&ClusterProviderConfig{}, &ClusterProviderConfigList{},
		&ProviderConfigUsage{}, &ProviderConfigUsageList{},
	)
}
