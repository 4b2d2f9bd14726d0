package v1alpha1

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resolution says where a replica's public endpoints come from.
// +kubebuilder:validation:Enum=Auto;Ingress;DNS;AWS
type Resolution string

// Resolutions.
const (
	// ResolutionAuto uses ingress IPs, else the AWS API for ELB hostnames
	// when AWS credentials are configured, else DNS.
	ResolutionAuto    Resolution = "Auto"
	ResolutionIngress Resolution = "Ingress"
	ResolutionDNS     Resolution = "DNS"
	ResolutionAWS     Resolution = "AWS"
)

// AuthKeyMode says how the config refers to the auth key.
// +kubebuilder:validation:Enum=File;Inline
type AuthKeyMode string

// AuthKey modes.
const (
	// AuthKeyModeFile writes AuthKey "file:<mountPath>/<key>": the config
	// Secret holds no credential; the pod mounts the auth key Secret.
	AuthKeyModeFile AuthKeyMode = "File"
	// AuthKeyModeInline copies the key into the config Secret.
	AuthKeyModeInline AuthKeyMode = "Inline"
)

// DefaultAuthKeyMountPath is where the function mounts the auth key Secret.
// A key the provider mints for replica R-i is in Secret R-i-authkey,
// mounted at DefaultAuthKeyMountPath/R-i.
const DefaultAuthKeyMountPath = "/etc/tailscale/authkey"

// MintedAuthKeySuffix names the Secret holding a minted key:
// <RelayConfig name><suffix>.
const MintedAuthKeySuffix = "-authkey"

// EndpointSource says where a replica's resolved endpoints came from, as
// reported in status.atProvider.source.
type EndpointSource string

// Endpoint sources.
const (
	SourceIngressIP EndpointSource = "ingress-ip"
	SourceDNS       EndpointSource = "dns"
	SourceAWSAPI    EndpointSource = "aws-api"
	SourceStatic    EndpointSource = "static"
	// The node the replica's pod runs on, by its ExternalIP addresses, or
	// its InternalIP ones when it has none (spec.forProvider.node).
	SourceNodeExternalIP EndpointSource = "node-external-ip"
	SourceNodeInternalIP EndpointSource = "node-internal-ip"
)

// AWS tags that say which namespace an Elastic IP or load balancer is for.
// The provider uses the platform's AWS credentials, so it uses one a
// RelayConfig names only when it carries one of them for the RelayConfig's
// namespace.
const (
	// TagRelay names the PeerRelay, <namespace>/<name>, on everything the
	// function composes in AWS.
	TagRelay = "peerrelay.io/relay"
	// TagNamespace is what a platform team puts on an Elastic IP it sets
	// aside for a namespace.
	TagNamespace = "peerrelay.io/namespace"
)

// NodeMode says which port of the replica's node reaches the relay.
// +kubebuilder:validation:Enum=NodePort;HostPort
type NodeMode string

// Node modes.
const (
	// NodeModeNodePort: the node port of the replica's Service.
	NodeModeNodePort NodeMode = "NodePort"
	// NodeModeHostPort: spec.forProvider.port, which the pod binds on its
	// node (a container hostPort).
	NodeModeHostPort NodeMode = "HostPort"
)

// NodeEndpoint advertises the node a replica's pod runs on.
type NodeEndpoint struct {
	// Pod is the replica's pod, in the RelayConfig's namespace.
	// +kubebuilder:validation:MinLength=1
	Pod string `json:"pod"`
	// Mode: NodePort or HostPort.
	Mode NodeMode `json:"mode"`
}

// LocalRef names an object in the same namespace.
type LocalRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// AuthKeyRef names the auth key.
type AuthKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:default=authkey
	// +optional
	Key string `json:"key,omitempty"`
	// Mode: File (default) or Inline.
	// +kubebuilder:default=File
	// +optional
	Mode AuthKeyMode `json:"mode,omitempty"`
	// MountPath is the folder the pod mounts the Secret at (File mode).
	// +optional
	MountPath string `json:"mountPath,omitempty"`
}

// AWSResolution tunes the AWS API lookup.
type AWSResolution struct {
	// Region of the load balancer.
	// +optional
	Region string `json:"region,omitempty"`
	// LoadBalancerName, when the ingress hostname does not say it, or when
	// there is no Service (a load balancer composed as a managed resource).
	// The load balancer must be tagged peerrelay.io/relay=<namespace>/...
	// or peerrelay.io/namespace=<namespace> for this RelayConfig's
	// namespace.
	// +optional
	LoadBalancerName string `json:"loadBalancerName,omitempty"`
	// SubnetID the replica's load balancer is placed in: the provider checks
	// it exists and is public, and reports its zone and VPC.
	// +kubebuilder:validation:Pattern=`^subnet-[0-9a-f]+$`
	// +optional
	SubnetID string `json:"subnetID,omitempty"`
	// AllocationID of the replica's Elastic IP: the provider checks it
	// is this namespace's (tagged peerrelay.io/namespace=<namespace>, or
	// peerrelay.io/relay=<namespace>/... when composed), exists, and is not
	// associated with anything but a load balancer.
	// +kubebuilder:validation:Pattern=`^eipalloc-[0-9a-f]+$`
	// +optional
	AllocationID string `json:"allocationID,omitempty"`
}

// AWSPlacementObservation is what the provider found checking
// spec.forProvider.aws's subnet and allocation against AWS.
type AWSPlacementObservation struct {
	// SubnetID and AllocationID that were checked.
	// +optional
	SubnetID string `json:"subnetID,omitempty"`
	// +optional
	AllocationID string `json:"allocationID,omitempty"`
	// Checked is false when the provider could not check (no AWS access in
	// its provider config); Message says why.
	Checked bool `json:"checked"`
	// Zone and VPCID of the subnet.
	// +optional
	Zone string `json:"zone,omitempty"`
	// +optional
	VPCID string `json:"vpcID,omitempty"`
	// Problems found, each naming the ID; empty when the placement is valid.
	// +optional
	Problems []string `json:"problems,omitempty"`
	// Message says why nothing was checked.
	// +optional
	Message string `json:"message,omitempty"`
	// LastValid is the last subnet and allocation the provider found
	// nothing against (valid, or not checkable): the placement the function
	// keeps a replica on while a new one waits for its check or is refused.
	// The provider's record: the function takes it from here, not from the
	// PeerRelay's status or the live Service, which a tenant may write.
	// +optional
	LastValid *AWSPlacement `json:"lastValid,omitempty"`
}

// AWSPlacement is a replica's subnet and Elastic IP allocation.
type AWSPlacement struct {
	SubnetID     string `json:"subnetID"`
	AllocationID string `json:"allocationID,omitempty"`
}

// RelayConfigParameters is the desired config of one relay replica.
type RelayConfigParameters struct {
	// ServiceRef is the replica's Service, whose load balancer ingress gives
	// the public endpoints.
	// +optional
	ServiceRef *LocalRef `json:"serviceRef,omitempty"`

	// ConfigSecretName is the Secret the provider writes the tailscaled
	// config into.
	// +kubebuilder:validation:MinLength=1
	ConfigSecretName string `json:"configSecretName"`

	// Hostname of the tailnet device.
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]{0,62}$`
	Hostname string `json:"hostname"`

	// Port is the relay's UDP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// AuthKeySecretRef names the auth key Secret.
	// +optional
	AuthKeySecretRef *AuthKeyRef `json:"authKeySecretRef,omitempty"`

	// Tags a minted auth key carries (used only when AuthKeySecretRef is
	// not set and the provider config has Tailscale API access). The
	// PeerRelay's bounds: at most 32, each a tailnet ACL tag.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^tag:[a-zA-Z][a-zA-Z0-9-]*$`
	// +optional
	Tags []string `json:"tags,omitempty"`

	// StateSecretName is the Secret tailscaled keeps its state in. The
	// provider creates it empty, controlled by this RelayConfig; its
	// device_id tells whether the device exists, so the config carries no
	// key once it does, a key is never minted twice, and the device can be
	// removed on deletion.
	// +optional
	StateSecretName string `json:"stateSecretName,omitempty"`

	// StaticEndpoints (ip:port) are advertised as well as resolved ones.
	// The PeerRelay's bounds: at most 16, each an ip:port; the provider
	// probes each, so their number is its cost.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	StaticEndpoints []string `json:"staticEndpoints,omitempty"`

	// Resolution: Auto (default), Ingress, DNS or AWS.
	// +kubebuilder:default=Auto
	// +optional
	Resolution Resolution `json:"resolution,omitempty"`

	// AWS tunes the AWS resolution.
	// +optional
	AWS *AWSResolution `json:"aws,omitempty"`

	// Node, when set, advertises the node the replica's pod runs on rather
	// than a load balancer: its ExternalIP addresses (else its InternalIP
	// ones, and condition Resolved says so) on the Service's node port or
	// the relay's host port.
	// +optional
	Node *NodeEndpoint `json:"node,omitempty"`

	// Traffic, when set, has the provider sample the replica's relay
	// counters from its pod's metrics port, at most once a minute, into
	// status.atProvider.traffic.
	// +optional
	Traffic *TrafficSource `json:"traffic,omitempty"`
}

// TrafficSource is where a replica's relay counters are read: its pod's
// metrics endpoint (containerboot's /metrics, TS_ENABLE_METRICS).
type TrafficSource struct {
	// Pod is the replica's pod, in the RelayConfig's namespace.
	// +kubebuilder:validation:MinLength=1
	Pod string `json:"pod"`
	// Port is the pod's metrics port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// TrafficSample is a sample of a replica's relay counters, as tailscaled
// counts them since it started.
type TrafficSample struct {
	// Sessions is the number of relay endpoints bound between two peers
	// (tailscaled_peer_relay_endpoints{state="open"}).
	Sessions int64 `json:"sessions"`
	// ForwardedPackets and ForwardedBytes are what the relay forwarded
	// (tailscaled_peer_relay_forwarded_{packets,bytes}_total, every
	// address family).
	ForwardedPackets int64 `json:"forwardedPackets"`
	ForwardedBytes   int64 `json:"forwardedBytes"`
	// SampledAt is when the counters were read; a sample equal to the
	// last one is not recorded, so this is when they last changed.
	SampledAt metav1.Time `json:"sampledAt"`
}

// RelayConfigObservation is what the provider resolved and wrote.
type RelayConfigObservation struct {
	// Endpoints advertised, ip:port, sorted.
	Endpoints []string `json:"endpoints,omitempty"`
	// Source of the resolved endpoints.
	Source EndpointSource `json:"source,omitempty"`
	// Hostname from the Service's ingress, when it had one.
	Hostname string `json:"hostname,omitempty"`
	// ConfigHash is the sha256 of the written config file.
	ConfigHash string `json:"configHash,omitempty"`
	// LastResolved is when endpoints were last resolved successfully.
	LastResolved *metav1.Time `json:"lastResolved,omitempty"`
	// ShrinkingSince is when a lookup of the same hostname first answered
	// fewer of the advertised addresses. They stay advertised for a grace:
	// a partial DNS answer must not flap the endpoints.
	// +optional
	ShrinkingSince *metav1.Time `json:"shrinkingSince,omitempty"`
	// DeviceID of the replica's tailnet device, from its state Secret,
	// recorded only while the RelayConfig was live and admitted
	// (Admission): the only device ID Delete acts on.
	DeviceID string `json:"deviceID,omitempty"`
	// Admission is the provider config whose policy admitted this
	// RelayConfig while it was live, as the provider read it. A RelayConfig
	// being deleted uses its provider config only if it is this one, the
	// same kind, name and UID: one never admitted gets nothing from it.
	// +optional
	Admission *Admission `json:"admission,omitempty"`
	// StateSecretUID is the UID of the state Secret the provider created.
	// No other Secret under its name, whatever its labels and owner
	// references say, is read for a device ID.
	// +optional
	StateSecretUID string `json:"stateSecretUID,omitempty"`
	// AuthKeyID of the key the provider minted, when it minted one: the
	// provider's own record, never read back from the key Secret.
	AuthKeyID string `json:"authKeyID,omitempty"`
	// LastMinted is when the provider last minted a key for this replica:
	// the next is minted no sooner than 30 s later, whatever happens to the
	// key Secret.
	// +optional
	LastMinted *metav1.Time `json:"lastMinted,omitempty"`
	// AWS is the check of spec.forProvider.aws's subnet and allocation.
	// +optional
	AWS *AWSPlacementObservation `json:"aws,omitempty"`
	// Traffic is the last sample of the relay's counters
	// (spec.forProvider.traffic).
	// +optional
	Traffic *TrafficSample `json:"traffic,omitempty"`
}

// Admission names the provider config that admitted a RelayConfig.
type Admission struct {
	// Kind is ProviderConfig or ClusterProviderConfig.
	Kind string `json:"kind"`
	// Name of the provider config.
	Name string `json:"name"`
	// UID of the provider config when it admitted the RelayConfig: one
	// deleted and made again under the same name is another.
	UID string `json:"uid"`
}

// RelayConfigSpec is the managed resource spec.
type RelayConfigSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`
	ForProvider              RelayConfigParameters `json:"forProvider"`
}

// RelayConfigStatus is the managed resource status.
type RelayConfigStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 RelayConfigObservation `json:"atProvider,omitempty"`
}

// A RelayConfig resolves one relay replica's public endpoints and writes its
// tailscaled config Secret.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed}
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="ENDPOINTS",type="string",JSONPath=".status.atProvider.endpoints"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type RelayConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RelayConfigSpec   `json:"spec"`
	Status RelayConfigStatus `json:"status,omitempty"`
}

// RelayConfigList lists RelayConfigs.
// +kubebuilder:object:root=true
type RelayConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RelayConfig `json:"items"`
}
