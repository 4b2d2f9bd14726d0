package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PeerRelayStatus is written by the function. Crossplane adds conditions.
type PeerRelayStatus struct {
	// Endpoints every replica advertises.
	// +optional
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Replicas, one entry each.
	// +optional
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
	// Addresses lists every distinct address in endpoints, space separated,
	// for the ENDPOINTS column: a printer column shows only a list's first
	// item.
	// +optional
	Addresses string `json:"addresses,omitempty"`
	// ReadyReplicas is how many replicas are ready of how many the spec
	// asks for, as "ready/desired", for the REPLICAS column.
	// +optional
	ReadyReplicas string `json:"readyReplicas,omitempty"`
	// ReachableReplicas is how many replicas answered the provider's
	// reachability probe of how many the spec asks for, as
	// "reachable/desired", for the REACHABLE column; empty when the
	// provider config does not probe (spec.probe).
	// +optional
	ReachableReplicas string `json:"reachableReplicas,omitempty"`
}

// Endpoint is one public address of one replica.
type Endpoint struct {
	Replica int32  `json:"replica"`
	Address string `json:"address"`
	Port    int32  `json:"port"`
}

// ReplicaStatus summarises one replica.
type ReplicaStatus struct {
	Index    int32  `json:"index"`
	Hostname string `json:"hostname"`
	// Endpoints as ip:port.
	// +optional
	Endpoints []string `json:"endpoints,omitempty"`
	PodReady  bool     `json:"podReady"`
	// Zone the replica is placed in: its AWS subnet's zone, or the zone a
	// node selector (spec.pod, a ProxyClass) pins its pod to; empty when
	// nothing places it.
	// +optional
	Zone string `json:"zone,omitempty"`
	// LoadBalancerReady: the replica's Service has a load balancer
	// address (static endpoints alone do not count; a NodePort or hostPort
	// replica has no load balancer, and it is false).
	LoadBalancerReady bool `json:"loadBalancerReady"`
	// Reachable: whether the replica's advertised endpoints answered the
	// provider's probe (True, False, or Unknown while it cannot tell);
	// empty when the provider config does not probe.
	// +optional
	Reachable corev1.ConditionStatus `json:"reachable,omitempty"`
	// Ready: the replica's config advertises its load balancer's address
	// and its pod is ready; when the provider probes, its endpoints
	// answered too.
	Ready bool `json:"ready"`
	// Reason says what the replica waits for while it is not ready.
	// +optional
	Reason string `json:"reason,omitempty"`
	// AWS is the subnet and Elastic IP the replica's Service or load
	// balancer was given (spec.aws): what the function decided, kept while
	// a new placement waits for the provider's check.
	// +optional
	AWS *ReplicaAWSStatus `json:"aws,omitempty"`
	// Traffic is what the replica's relay has carried, sampled by the
	// provider from its metrics port at most once a minute, while metrics
	// are enabled (spec.metrics.enable, or a ProxyClass's).
	// +optional
	Traffic *ReplicaTraffic `json:"traffic,omitempty"`
}

// ReplicaTraffic is a sample of a replica's relay counters, counted since
// its tailscaled started.
type ReplicaTraffic struct {
	// Sessions is the number of relay sessions bound between two peers now.
	Sessions int64 `json:"sessions"`
	// ForwardedPackets and ForwardedBytes are what the relay forwarded.
	ForwardedPackets int64 `json:"forwardedPackets"`
	ForwardedBytes   int64 `json:"forwardedBytes"`
	// SampledAt is when the counters last changed.
	SampledAt metav1.Time `json:"sampledAt"`
}

// ReplicaAWSStatus is a replica's AWS placement in use.
type ReplicaAWSStatus struct {
	SubnetID     string `json:"subnetID"`
	AllocationID string `json:"allocationID"`
}
