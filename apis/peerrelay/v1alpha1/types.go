package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults shared by the schema markers and the function, which applies them
// itself because `crossplane render` and older XRs never saw the API server's
// defaulting.
const (
	DefaultReplicas = 1
	DefaultPort     = 41641
	DefaultTag      = "tag:k8s"
	// DefaultImage is the tailscale image the relay pods run. v1.102 is the
	// first release whose tailscaled accepts RelayServerPort and
	// RelayServerStaticEndpoints in its config file.
	DefaultImage = "tailscale/tailscale:v1.102.5"
	// DefaultAuthKeySecretKey is the key read from spec.authKeySecretRef.
	DefaultAuthKeySecretKey = "authkey"
	// MaxReplicas caps spec.replicas: every replica is its own load balancer.
	MaxReplicas = 100
)

// PeerRelay runs spec.replicas tailnet peer relays, each on its own public UDP
// endpoint.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=crossplane
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=`.status.conditions[?(@.type=="PeerRelayReady")].reason`,description="Why the peer relay is or is not ready."
// +kubebuilder:printcolumn:name="REPLICAS",type="string",JSONPath=`.status.readyReplicas`,description="Ready replicas of those the spec asks for."
// +kubebuilder:printcolumn:name="REACHABLE",type="string",JSONPath=`.status.reachableReplicas`,description="Replicas whose endpoints answered the provider's probe, when it probes."
// +kubebuilder:printcolumn:name="ENDPOINTS",type="string",JSONPath=`.status.addresses`,description="Public addresses the replicas are reachable on."
type PeerRelay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PeerRelaySpec   `json:"spec"`
	Status PeerRelayStatus `json:"status,omitempty"`
}

// PeerRelayList lists PeerRelays.
// +kubebuilder:object:root=true
type PeerRelayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PeerRelay `json:"items"`
}

// PeerRelaySpec is what the user asks for.
// +kubebuilder:validation:XValidation:rule="!has(self.aws) || !has(self.aws.elasticIPs) || self.aws.elasticIPs.size() >= (has(self.replicas) ? self.replicas : 1)",message="spec.aws.elasticIPs must have at least spec.replicas entries (one per replica)"
// +kubebuilder:validation:XValidation:rule="!has(self.port) || !has(self.service) || !has(self.service.port) || self.port == self.service.port",message="spec.port and spec.service.port name the same UDP port: set one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.hostPort) || !self.hostPort || ((!has(self.service) || !has(self.service.type) || self.service.type == 'LoadBalancer') && !has(self.aws))",message="spec.hostPort advertises each pod's node: it goes with neither spec.service.type NodePort nor spec.aws"
// +kubebuilder:validation:XValidation:rule="!has(self.service) || !has(self.service.type) || self.service.type != 'NodePort' || !has(self.aws)",message="spec.service.type NodePort advertises each pod's node: it does not go with spec.aws (load balancers)"
// +kubebuilder:validation:XValidation:rule="!has(self.hostPort) || !self.hostPort || ((!has(self.port) || (self.port >= 1024 && !(self.port in [4789, 6081, 8472, 51820]))) && (!has(self.service) || !has(self.service.port) || (self.service.port >= 1024 && !(self.service.port in [4789, 6081, 8472, 51820]))))",message="spec.hostPort binds spec.port on the node: it must be 1024 or above and not a port cluster networking uses (4789 VXLAN, 6081 Geneve, 8472 Flannel VXLAN, 51820 WireGuard)"
// +kubebuilder:validation:XValidation:rule="has(self.tailnet) == has(oldSelf.tailnet)",message="spec.tailnet is immutable: it can be neither set nor removed after the PeerRelay is created"
type PeerRelaySpec struct {
	// Replicas is the number of peer relay devices, each with its own public
	// endpoint.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Tags the relay devices join the tailnet with. Your ACL grants
	// tailscale.com/cap/relay to these tags. Default: the function Input's
	// tags, else tag:k8s. A key from authKeySecretRef carries its own tags,
	// which win (the PeerRelay gets a warning when both are set).
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +optional
	Tags []Tag `json:"tags,omitempty"`

	// Metrics exposes tailscaled's metrics (containerboot's /metrics, the
	// peer relay's forwarded packets and bytes among them) on each relay
	// pod's port named "metrics", 9002. A ProxyClass's spec.metrics.enable
	// does the same.
	// +optional
	Metrics *Metrics `json:"metrics,omitempty"`

	// Tailnet names the ClusterProviderConfig whose Tailscale API access
	// (spec.tailscale) the replicas use: which tailnet keys are minted in and
	// devices removed from. Blank: the function Input's provider config
	// (ClusterProviderConfig "default" unless set). Immutable, as in the
	// Tailscale operator, whose Tailnet resource it stands for.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.tailnet is immutable"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Tailnet string `json:"tailnet,omitempty"`

	// HostnamePrefix names the devices <prefix>-<index>; default the
	// PeerRelay's name.
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]{0,61}$`
	// +optional
	HostnamePrefix string `json:"hostnamePrefix,omitempty"`

	// Port is the UDP port the relay listens and is advertised on. Default:
	// the function Input's port, else 41641. spec.service.port, the Tailscale
	// operator's name for it, is the same setting: set either (both only if
	// they are equal).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// AuthKeySecretRef names a Secret in the PeerRelay's namespace holding a
	// reusable, pre-authorised, tagged auth key. It is mounted read-only into
	// the pods; the generated config refers to the file, never the key.
	// +optional
	AuthKeySecretRef *SecretKeyRef `json:"authKeySecretRef,omitempty"`

	// Pod customises the relay pods.
	// +optional
	Pod *PodSpec `json:"pod,omitempty"`

	// ProxyClass names a Tailscale operator ProxyClass to read pod settings
	// from, when one exists.
	// +optional
	ProxyClass string `json:"proxyClass,omitempty"`

	// Service customises each replica's Service.
	// +optional
	Service *ServiceSpec `json:"service,omitempty"`

	// StaticEndpoints are extra ip:port endpoints (IPv4 or IPv6, as
	// 203.0.113.7:6969 or [2001:db8::7]:6969) advertised by every replica
	// beside its load balancer's: a port forward to the relay, an LB-IPAM
	// address. As in the Tailscale operator, a replica whose only endpoints
	// are static counts as addressed, and a static entry's port wins for an
	// address the load balancer also provides.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	StaticEndpoints []string `json:"staticEndpoints,omitempty"`

	// AWS configures Elastic IP pinning for the AWS Load Balancer Controller.
	// +optional
	AWS *AWSSpec `json:"aws,omitempty"`

	// HostPort has each relay pod bind its UDP port on its node (a container
	// hostPort) and advertise that node's ExternalIP, else its InternalIP,
	// on it: no Service is needed to reach it. Two replicas cannot share a
	// node. For bare metal and the edge.
	// +optional
	HostPort bool `json:"hostPort,omitempty"`

	// DisruptionBudget bounds how many replicas a voluntary disruption (a
	// node drain, a cluster upgrade) may take down at once, through a
	// PodDisruptionBudget over the relay pods. Default: one at a time.
	// +optional
	DisruptionBudget *DisruptionBudget `json:"disruptionBudget,omitempty"`
}

// DisruptionBudget is the PeerRelay's PodDisruptionBudget.
type DisruptionBudget struct {
	// MaxUnavailable replicas, a number or a percentage of spec.replicas
	// ("25%", rounded up); default 1. A drain evicts a relay pod only while
	// fewer than this many are unavailable.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="spec.disruptionBudget.maxUnavailable must be at least 1 or a percentage from 1% to 100%: 0 would block every node drain"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// Tag is a tailnet ACL tag.
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^tag:[a-zA-Z][a-zA-Z0-9-]*$`
type Tag string

// SecretKeyRef names a key of a Secret in the same namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the Secret; default "authkey".
	// +optional
	Key string `json:"key,omitempty"`
}

// PodSpec is the subset of a pod the user may set, as the Tailscale
// operator's ProxyClass offers it.
type PodSpec struct {
	// Image of the tailscale container (v1.102 or later).
	// +optional
	Image string `json:"image,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// SecurityContext of the tailscaled container.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// ServiceSpec customises the per-replica Services.
type ServiceSpec struct {
	// Annotations applied to every replica's Service, after the cloud
	// defaults and before Elastic IP pinning, which always wins.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Port is the UDP port of the Service, the relay's listener and the
	// advertised load balancer endpoints, as in the Tailscale operator;
	// spec.port is the same setting.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// Type of every replica's Service: LoadBalancer (default), each replica
	// advertised on its load balancer's addresses, or NodePort, each
	// replica advertised on the node its pod runs on (its ExternalIP, else
	// its InternalIP) at the Service's node port, with externalTrafficPolicy
	// Local so that only that node answers and the relay sees its peers'
	// own addresses. For clusters without a load balancer for UDP.
	// +kubebuilder:validation:Enum=LoadBalancer;NodePort
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// IPFamilyPolicy of every replica's Service. Default PreferDualStack:
	// on a dual-stack cluster the load balancer gets IPv4 and IPv6
	// addresses and the replica advertises both; a single-stack cluster
	// gives its one family.
	// +kubebuilder:validation:Enum=SingleStack;PreferDualStack;RequireDualStack
	// +optional
	IPFamilyPolicy *corev1.IPFamilyPolicy `json:"ipFamilyPolicy,omitempty"`
}

// LoadBalancerMode says who provisions each replica's AWS load balancer.
// +kubebuilder:validation:Enum=Controller;Managed
type LoadBalancerMode string

// Load balancer modes.
const (
	// LoadBalancerController: the AWS Load Balancer Controller provisions an
	// NLB for each replica's LoadBalancer Service, from its annotations.
	LoadBalancerController LoadBalancerMode = "Controller"
	// LoadBalancerManaged: the function composes each replica's NLB, UDP
	// target group, listener and target registration as Crossplane AWS
	// managed resources; the Services are ClusterIP.
	LoadBalancerManaged LoadBalancerMode = "Managed"
)

// ZonePlacement says where replicas are scheduled.
// +kubebuilder:validation:Enum=Any;PerReplica
type ZonePlacement string

// Zone placements.
const (
	// ZonePlacementAny leaves scheduling to spec.pod.
	ZonePlacementAny ZonePlacement = "Any"
	// ZonePlacementPerReplica runs each replica in the zone of its own
	// subnet (one single-pod StatefulSet per replica).
	ZonePlacementPerReplica ZonePlacement = "PerReplica"
)

// AWSSpec pins replicas to Elastic IPs, optionally allocating them and the
// load balancers as Crossplane AWS managed resources.
// +kubebuilder:validation:XValidation:rule="!has(self.subnets) || !has(self.elasticIPs)",message="spec.aws.subnets generates spec.aws.elasticIPs: set one of them, not both"
// +kubebuilder:validation:XValidation:rule="has(self.subnets) == (has(self.allocate) && self.allocate)",message="spec.aws.subnets and spec.aws.allocate: true go together (replica i gets a new Elastic IP in subnets[i mod len])"
type AWSSpec struct {
	// Region the AWS managed resources are created in; default the
	// function Input's awsRegion.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +optional
	Region string `json:"region,omitempty"`

	// ElasticIPs: replica N uses entry N.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +optional
	ElasticIPs []ElasticIP `json:"elasticIPs,omitempty"`

	// Subnets, with allocate: true, stand for elasticIPs: replica i gets a
	// new Elastic IP and subnets[i mod len(subnets)].
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:Pattern=`^subnet-[0-9a-f]+$`
	// +listType=set
	// +optional
	Subnets []string `json:"subnets,omitempty"`

	// Allocate goes with subnets.
	// +optional
	Allocate bool `json:"allocate,omitempty"`

	// LoadBalancer: Controller (default) or Managed.
	// +kubebuilder:default=Controller
	// +optional
	LoadBalancer LoadBalancerMode `json:"loadBalancer,omitempty"`

	// ZonePlacement: Any or PerReplica. Default: PerReplica when replicas
	// are pinned to subnets (elasticIPs or subnets), because a pinned subnet
	// enables only its own zone on the replica's NLB and an NLB forwards
	// only to targets in its enabled zones; Any otherwise.
	// +optional
	ZonePlacement ZonePlacement `json:"zonePlacement,omitempty"`

	// VPCID of the subnets, for the Managed target groups; default the VPC
	// the provider finds the subnet in.
	// +kubebuilder:validation:Pattern=`^vpc-[0-9a-f]+$`
	// +optional
	VPCID string `json:"vpcID,omitempty"`
}

// ElasticIP is an allocation, or a request for one, and the subnet its NLB
// is placed in.
// +kubebuilder:validation:XValidation:rule="has(self.allocationID) != (has(self.allocate) && self.allocate)",message="set allocationID or allocate: true, not both"
type ElasticIP struct {
	// AllocationID of an existing Elastic IP, tagged
	// peerrelay.io/namespace=<the PeerRelay's namespace> by the platform
	// team: the provider uses no other.
	// +kubebuilder:validation:Pattern=`^eipalloc-[0-9a-f]+$`
	// +optional
	AllocationID string `json:"allocationID,omitempty"`
	// Allocate a new Elastic IP as a Crossplane managed resource.
	// +optional
	Allocate bool `json:"allocate,omitempty"`
	// SubnetID of a public subnet in the allocation's zone.
	// +kubebuilder:validation:Pattern=`^subnet-[0-9a-f]+$`
	SubnetID string `json:"subnetID"`
	// Zone of the subnet, for zonePlacement: PerReplica; default the zone
	// the provider finds the subnet in.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`
	// +optional
	Zone string `json:"zone,omitempty"`
}

// Metrics says whether the relay pods serve their metrics.
// +kubebuilder:validation:XValidation:rule="!has(self.podMonitor) || !self.podMonitor.enable || self.enable",message="spec.metrics.podMonitor.enable needs spec.metrics.enable: true (a PodMonitor scrapes the metrics port)"
type Metrics struct {
	// Enable serves /metrics on port 9002, named "metrics".
	Enable bool `json:"enable"`
	// PodMonitor composes a Prometheus Operator PodMonitor for the relay
	// pods' metrics port, when the PodMonitor CRD is installed. A
	// ProxyClass's spec.metrics.serviceMonitor does the same.
	// +optional
	PodMonitor *PodMonitor `json:"podMonitor,omitempty"`
}

// PodMonitor says whether to compose a PodMonitor, and its labels.
type PodMonitor struct {
	Enable bool `json:"enable"`
	// Labels on the PodMonitor, for a Prometheus's podMonitorSelector.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}
