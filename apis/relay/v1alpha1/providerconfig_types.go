package v1alpha1

import (
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AWSCredentialsSource says where AWS credentials come from.
// +kubebuilder:validation:Enum=None;Secret;InjectedIdentity
type AWSCredentialsSource string

// AWS credential sources.
const (
	// AWSCredentialsNone: no AWS calls are made; AWS resolution is off.
	AWSCredentialsNone AWSCredentialsSource = "None"
	// AWSCredentialsSecret reads aws_access_key_id, aws_secret_access_key
	// and optionally aws_session_token from a Secret.
	AWSCredentialsSecret AWSCredentialsSource = "Secret"
	// AWSCredentialsInjectedIdentity uses the SDK's default chain: IRSA,
	// pod identity or the instance role.
	AWSCredentialsInjectedIdentity AWSCredentialsSource = "InjectedIdentity"
)

// Keys read from an AWS credentials Secret.
const (
	AWSAccessKeyIDKey     = "aws_access_key_id"
	AWSSecretAccessKeyKey = "aws_secret_access_key"
	AWSSessionTokenKey    = "aws_session_token"
)

// DefaultResolveTimeout bounds each DNS or AWS lookup.
const DefaultResolveTimeout = 5 // seconds

// MaxResolveTimeout is the most spec.resolveTimeout may say.
const MaxResolveTimeout = 30 // seconds

// AWSConfig configures AWS API access.
type AWSConfig struct {
	// Source of credentials; default None.
	// +kubebuilder:default=None
	// +optional
	Source AWSCredentialsSource `json:"source,omitempty"`
	// SecretRef names the credentials Secret (Source Secret). A
	// ProviderConfig reads it from its own namespace; a
	// ClusterProviderConfig needs the namespace set.
	// +optional
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Region used when a RelayConfig names none.
	// +optional
	Region string `json:"region,omitempty"`
	// Endpoint overrides the AWS API endpoint (a VPC endpoint, or a test
	// server).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// SecretRef names a Secret. Namespace defaults to the RelayConfig's, and a
// namespaced ProviderConfig can only read Secrets in its own namespace.
type SecretRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// TailscaleAPI lets the provider mint per-replica auth keys and remove a
// replica's device when the replica goes away.
type TailscaleAPI struct {
	// OAuthSecretRef names a Secret with keys client_id and client_secret of
	// an OAuth client with the auth_keys and devices:core scopes, allowed to
	// use the relays' tags.
	OAuthSecretRef SecretRef `json:"oauthSecretRef"`
	// Tailnet; default "-", the OAuth client's own.
	// +optional
	Tailnet string `json:"tailnet,omitempty"`
	// BaseURL of the API; default https://api.tailscale.com.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	BaseURL string `json:"baseURL,omitempty"`
}

// Keys read from the OAuth client Secret.
const (
	OAuthClientIDKey     = "client_id"
	OAuthClientSecretKey = "client_secret"
)

// DNSConfig configures hostname resolution.
type DNSConfig struct {
	// Server (ip:port) to ask instead of the system resolver.
	// +kubebuilder:validation:Pattern=`^[^\s]+:[0-9]+$`
	// +optional
	Server string `json:"server,omitempty"`
}

// ProviderConfigSpec configures how the provider reaches the world.
type ProviderConfigSpec struct {
	// +optional
	AWS *AWSConfig `json:"aws,omitempty"`
	// +optional
	DNS *DNSConfig `json:"dns,omitempty"`
	// Tailscale API access, for minting auth keys and removing devices.
	// +optional
	Tailscale *TailscaleAPI `json:"tailscale,omitempty"`
	// ControlURL of the tailnet's control server, written as the relays'
	// ServerURL: for Headscale or another self-hosted control server.
	// Default Tailscale's.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	ControlURL string `json:"controlURL,omitempty"`
	// ResolveTimeout bounds each DNS or AWS lookup; default 5s, at most
	// 30s: every lookup holds one of the provider's workers that long.
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('30s')",message="spec.resolveTimeout is at most 30s: every lookup holds one of the provider's workers"
	// +kubebuilder:validation:Type=string
	// +optional
	ResolveTimeout *metav1.Duration `json:"resolveTimeout,omitempty"`
	// Policy limits who may use a ClusterProviderConfig and what the keys
	// it mints may carry. The platform's: a namespaced ProviderConfig's
	// own policy binds nobody but the tenant who writes it.
	// +optional
	Policy *Policy `json:"policy,omitempty"`
	// Probe proves that each replica's advertised endpoints answer, the way
	// a tailnet client reaches a relay: the provider joins the tailnet as
	// an ephemeral device of its own, asks each relay for an endpoint and
	// knocks on every advertised address. Replicas then report Reachable,
	// and a PeerRelay is ready only when its replicas answer. Needs
	// spec.tailscale, to mint the prober's key. Off when unset.
	// +optional
	Probe *Probe `json:"probe,omitempty"`
}

// Probe configures the reachability probe.
type Probe struct {
	// Tags of the prober's device. The tailnet policy must grant these
	// tags tailscale.com/cap/relay on the relays' tags, as it does for the
	// clients that use the relays.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Pattern=`^tag:[a-zA-Z][a-zA-Z0-9-]*$`
	Tags []string `json:"tags"`
	// Interval between probes of one replica; default 1m. A shorter one
	// than 30s counts as 30s.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// How often a replica is probed: by default, and at most.
const (
	DefaultProbeInterval = time.Minute
	MinProbeInterval     = 30 * time.Second
)

// Policy is what the platform allows the users of a provider config.
type Policy struct {
	// Namespaces whose RelayConfigs may use this provider config; empty:
	// every namespace. A RelayConfig being deleted may always use it, to
	// remove its device.
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// Tags the keys minted through this provider config may carry; empty:
	// any tag the OAuth client may grant. A key a user supplies is not
	// minted, and not checked.
	// +optional
	Tags []string `json:"tags,omitempty"`
}

// ProviderConfigStatus is the status of a provider config.
type ProviderConfigStatus struct {
	xpv2.ProviderConfigStatus `json:",inline"`
}

// A ProviderConfig configures provider-peerrelay for RelayConfigs in its
// namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,provider}
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// ProviderConfigList lists ProviderConfigs.
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

// A ClusterProviderConfig configures provider-peerrelay for RelayConfigs in
// any namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider}
type ClusterProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// ClusterProviderConfigList lists ClusterProviderConfigs.
// +kubebuilder:object:root=true
type ClusterProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProviderConfig `json:"items"`
}

// A ProviderConfigUsage records that a RelayConfig uses a ProviderConfig or
// a ClusterProviderConfig; it lives in the RelayConfig's namespace.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,provider}
type ProviderConfigUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	xpv2.TypedProviderConfigUsage `json:",inline"`
}

// ProviderConfigUsageList lists ProviderConfigUsages.
// +kubebuilder:object:root=true
type ProviderConfigUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfigUsage `json:"items"`
}
