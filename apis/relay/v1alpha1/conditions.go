package v1alpha1

import xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

// A RelayConfig's conditions beside Crossplane's Ready and Synced, and their
// reasons. The provider writes them and the PeerRelay function reads them:
// they are the contract between the two, defined here once. The function
// decides on types and reasons only, never on a message's words.
const (
	// ConditionAuthKey: whether the replica has what it needs to log in.
	ConditionAuthKey     xpv2.ConditionType   = "AuthKeyAvailable"
	ReasonKeyLoggedIn    xpv2.ConditionReason = "LoggedIn"
	ReasonKeyAvailable   xpv2.ConditionReason = "Available"
	ReasonKeyUnavailable xpv2.ConditionReason = "NoAuthKey"
	ReasonKeyRejected    xpv2.ConditionReason = "AuthKeyRejected"
	ReasonKeyMinting     xpv2.ConditionReason = "Minting"
	// ReasonMintBudgetSpent: the namespace's or the provider config's
	// budget of minted keys is spent; the key is minted when it refills.
	ReasonMintBudgetSpent xpv2.ConditionReason = "MintBudgetSpent"
	// ReasonKeySecretMissing: the Secret spec.authKeySecretRef names, or
	// its key, is missing.
	ReasonKeySecretMissing xpv2.ConditionReason = "AuthKeySecretMissing"

	// ConditionResolved: whether the replica's public endpoints are known.
	ConditionResolved     xpv2.ConditionType   = "EndpointsResolved"
	ReasonResolved        xpv2.ConditionReason = "Resolved"
	ReasonResolveFailed   xpv2.ConditionReason = "ResolveFailed"
	ReasonAwaitingAddress xpv2.ConditionReason = "AwaitingAddress"

	// ConditionDeviceCleanup: whether the replica's device leaves the
	// tailnet when the RelayConfig is deleted.
	ConditionDeviceCleanup xpv2.ConditionType   = "DeviceCleanup"
	ReasonCleanupByAPI     xpv2.ConditionReason = "TailscaleAPI"
	ReasonNoAPIAccess      xpv2.ConditionReason = "NoAPIAccess"

	// ConditionAWSPlacement: the check of spec.forProvider.aws's subnet and
	// Elastic IP against AWS.
	ConditionAWSPlacement xpv2.ConditionType   = "AWSPlacementValid"
	ReasonPlacementValid  xpv2.ConditionReason = "Valid"
	ReasonPlacementBad    xpv2.ConditionReason = "Invalid"
	ReasonCheckFailed     xpv2.ConditionReason = "CheckFailed"
	ReasonNotChecked      xpv2.ConditionReason = "NotChecked"

	// ConditionReachable: whether the replica's advertised endpoints
	// answered the provider's probe (the provider config's spec.probe).
	// Absent when the probe is off.
	ConditionReachable xpv2.ConditionType = "Reachable"
	// ReasonAnswered: every advertised endpoint answered.
	ReasonAnswered xpv2.ConditionReason = "Answered"
	// ReasonPartlyAnswered: some advertised endpoints answered, others did
	// not; the message names them. The replica is reachable.
	ReasonPartlyAnswered xpv2.ConditionReason = "PartlyAnswered"
	// ReasonNoAnswer: no advertised endpoint answered.
	ReasonNoAnswer xpv2.ConditionReason = "NoAnswer"
	// ReasonProbePending: nothing to probe yet (no device or no endpoint).
	ReasonProbePending xpv2.ConditionReason = "ProbePending"
	// ReasonProbeFailed: the probe could not ask the relay (the prober
	// cannot join, or the relay allocates it no endpoint); the message
	// says which.
	ReasonProbeFailed xpv2.ConditionReason = "ProbeFailed"

	// ConditionProviderConfig: whether the provider could read the
	// ProviderConfig or ClusterProviderConfig spec.providerConfigRef names.
	// While it cannot, nothing else is reconciled (Synced=False says why).
	ConditionProviderConfig        xpv2.ConditionType   = "ProviderConfigUsable"
	ReasonProviderConfigUsable     xpv2.ConditionReason = "Usable"
	ReasonProviderConfigUnreadable xpv2.ConditionReason = "ProviderConfigUnreadable"
	// ReasonPolicyDenied: the provider config's spec.policy does not let
	// the RelayConfig's namespace use it.
	ReasonPolicyDenied xpv2.ConditionReason = "PolicyDenied"
)

// Finalizer is the managed reconciler's finalizer
// (crossplane-runtime's managed.FinalizerName). The function composes every
// RelayConfig with it, so that the provider's first reconcile does not
// write it: one write, and one watch event on the PeerRelay, fewer per
// replica.
const Finalizer = "finalizer.managedresource.crossplane.io"
