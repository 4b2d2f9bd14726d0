package v1alpha1

import xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

// A PeerRelay's conditions beside Crossplane's Ready and Synced, their
// reasons, and the reasons of the events the function records on it. The
// function writes them and users, dashboards and tests read them: they are
// the PeerRelay's contract, defined here once. As for a RelayConfig's
// (relay/v1alpha1), the contract is types and reasons, never a message's
// words.
const (
	// ConditionPeerRelayReady: whether every replica advertises a public
	// endpoint and runs, the Tailscale operator's word for it. Its reason
	// is one of the Reason* below or, while some replica cannot log in,
	// that replica's RelayConfig's AuthKeyAvailable reason
	// (relay/v1alpha1's ReasonKeySecretMissing, ReasonKeyUnavailable,
	// ReasonKeyRejected or ReasonMintBudgetSpent).
	ConditionPeerRelayReady xpv2.ConditionType = "PeerRelayReady"
	// ReasonReady: every replica is ready (True).
	ReasonReady xpv2.ConditionReason = "PeerRelayReady"
	// ReasonEndpointsPending: some replica's config advertises no public
	// endpoint yet.
	ReasonEndpointsPending xpv2.ConditionReason = "EndpointsPending"
	// ReasonPodsPending: some replica's pod is not ready.
	ReasonPodsPending xpv2.ConditionReason = "PodsPending"
	// ReasonEndpointsUnreachable: the provider probes (its config's
	// spec.probe) and some replica's endpoints did not answer.
	ReasonEndpointsUnreachable xpv2.ConditionReason = "EndpointsUnreachable"
	// ReasonAWSConfigInvalid: spec.aws cannot be acted on; the replicas
	// it concerns keep what they had until it is fixed.
	ReasonAWSConfigInvalid xpv2.ConditionReason = "AWSConfigInvalid"
	// ReasonSpecInvalid: the spec cannot be composed (the function's
	// result is Fatal).
	ReasonSpecInvalid xpv2.ConditionReason = "SpecInvalid"
	// ReasonTailnetUnavailable: spec.tailnet names no ClusterProviderConfig
	// the provider can use, or its policy leaves the namespace out.
	ReasonTailnetUnavailable xpv2.ConditionReason = "TailnetUnavailable"

	// ConditionDeviceCleanup: the RelayConfigs' condition of the same name
	// (relay/v1alpha1's ConditionDeviceCleanup, with its reasons), shown on
	// the PeerRelay only when False: some replica's device would stay in
	// the tailnet when the PeerRelay is deleted.
	ConditionDeviceCleanup xpv2.ConditionType = "DeviceCleanup"

	// ConditionResponsive is Crossplane's, not the function's: False while
	// Crossplane's watch circuit breaker is open on the PeerRelay and drops
	// its watch events but one every 30 s, for up to 5 minutes. The
	// function reads it to keep its TTL short meanwhile.
	ConditionResponsive xpv2.ConditionType = "Responsive"
)

// EventReason is the reason of an event the function records on a PeerRelay
// (and its claim), readable in `kubectl describe peerrelay`.
type EventReason string

// The events of a replica's transitions, one per change between the status
// the PeerRelay carried and the one the function writes.
const (
	// EventLoadBalancerAddressed: the replica's load balancer got an
	// address.
	EventLoadBalancerAddressed EventReason = "LoadBalancerAddressed"
	// EventEndpointsChanged: the replica's config advertises other public
	// endpoints.
	EventEndpointsChanged EventReason = "EndpointsChanged"
	// EventReplicaReady: the replica became ready.
	EventReplicaReady EventReason = "ReplicaReady"
	// EventReplicaNotReady (a warning): the replica is no longer ready.
	EventReplicaNotReady EventReason = "ReplicaNotReady"
	// EventReplicaReachable: the replica's endpoints answered the
	// provider's reachability probe.
	EventReplicaReachable EventReason = "ReplicaReachable"
	// EventReplicaUnreachable (a warning): the replica's endpoints did not
	// answer the provider's reachability probe.
	EventReplicaUnreachable EventReason = "ReplicaUnreachable"
)
