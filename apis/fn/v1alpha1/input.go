// Package v1alpha1 holds the composition function's Input: composition-level
// defaults for every PeerRelay the composition serves.
// +kubebuilder:object:generate=true
// +groupName=fn.peerrelay.io
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cloud selects the cloud-specific Service annotations.
// +kubebuilder:validation:Enum=aws;azure;gcp;none
type Cloud string

// Clouds the function knows load balancer annotations for.
const (
	CloudAWS   Cloud = "aws"
	CloudAzure Cloud = "azure"
	// CloudGCP needs no annotation: GKE gives a LoadBalancer Service an
	// external passthrough Network Load Balancer, public and UDP-capable,
	// with an IPv6 address too when the Service is dual-stack on a
	// dual-stack subnet.
	CloudGCP  Cloud = "gcp"
	CloudNone Cloud = "none"
)

// Input gives composition-level defaults. Every field is optional.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Image of the tailscale container when the PeerRelay names none.
	// +optional
	Image string `json:"image,omitempty"`

	// Tags when the PeerRelay names none.
	// +optional
	Tags []string `json:"tags,omitempty"`

	// Port when the PeerRelay names none.
	// +optional
	Port *int32 `json:"port,omitempty"`

	// Cloud selects the default Service annotations: aws and azure add those
	// load balancer's public-address annotations; gcp and none add none;
	// default aws and azure both, as the Tailscale operator does, since
	// each cloud (GKE too) ignores the others'.
	// +optional
	Cloud Cloud `json:"cloud,omitempty"`

	// ProviderConfigName the composed RelayConfigs use; default "default".
	// +optional
	ProviderConfigName string `json:"providerConfigName,omitempty"`

	// ProviderConfigKind the composed RelayConfigs use; default
	// ClusterProviderConfig.
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	// +optional
	ProviderConfigKind string `json:"providerConfigKind,omitempty"`

	// AWSRegion the composed AWS managed resources use when a PeerRelay's
	// spec.aws.region is not set.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +optional
	AWSRegion string `json:"awsRegion,omitempty"`

	// AWSProviderConfig the composed AWS managed resources use; default
	// the AWS provider's own default.
	// +optional
	AWSProviderConfig *AWSProviderConfigRef `json:"awsProviderConfig,omitempty"`
}

// AWSProviderConfigRef names the AWS provider's config.
type AWSProviderConfigRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Kind, for namespaced (v2) managed resources: ProviderConfig or
	// ClusterProviderConfig (default).
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	// +optional
	Kind string `json:"kind,omitempty"`
}
