// Package relayconfig is the RelayConfig controller: it resolves one relay
// replica's public endpoints and writes its tailscaled config Secret.
//
// It runs on crossplane-runtime's managed reconciler, and leaves the
// reconciler's grain in seven places. Each saves writes to the RelayConfig:
// every write is a watch event on the PeerRelay that composed it, and
// Crossplane counts those against the PeerRelay's watch circuit breaker. A
// check in TestReconcilerWrites (grain_test.go) fails when any is removed.
//
//  1. Observe reports a missing config Secret as existing and not up to
//     date, so Update writes it (external.go, Observe). Create would cost
//     the create-pending and create-succeeded annotation writes, and they
//     guard nothing here: the Secret's name is fixed and only we write it.
//     Once the RelayConfig is being deleted, a missing Secret means nothing
//     is left to delete, but for a recorded device. Check:
//     MissingSecretIsUpdated.
//  2. No external-name initializer (setup.go, newReconciler): the
//     config Secret is named by spec.forProvider.configSecretName, and the
//     annotation would be one more write. Check: NoExternalName.
//  3. The finalizer keeps the observation (finalizer.go): the Update that
//     adds it loads the stored object back, status included, and the
//     reconcile's status write would then need a second reconcile. Check:
//     StatusKeptAcrossFinalizer.
//  4. The external client is made per reconcile and carries what Observe
//     found (the rendered config, a missing state Secret, a key to mint)
//     to Update (external.go, external.obs). Update writes exactly the
//     config Observe compared, and nothing is resolved twice. Check:
//     ObserveHandsOverToUpdate.
//  5. Faults back off whatever their words: the provider's own status
//     writes do not wake a RelayConfig (setup.go, the For predicate), and
//     the backoff is per RelayConfig (backoff.go). Check:
//     TestTailscaleAPIOutageUnknownWords, TestAWSResolutionAndOutage.
//  6. The status update every reconcile ends with is not sent when it
//     would change nothing (quietstatus.go): a no-op to the API server, no
//     watch event, but one write request per RelayConfig per poll at rest.
//     Check: NoOpStatusNotSent.
//  7. The function composes the RelayConfig with the reconciler's
//     finalizer (v1alpha1.Finalizer), so the first reconcile does not
//     write it. A RelayConfig then holds it before the provider ever saw
//     it: one no provider config admitted goes at once when deleted
//     (connector.go, admitted), and while the provider is not running a
//     RelayConfig's deletion waits for it, as every managed resource's
//     does once reconciled. Check: TestComposedFinalizer,
//     TestConnectGivesUpWithoutCredentials/NeverAdmitted.
//
// Its duties, each in its file: admission by the provider config's policy
// and the clients it grants (connector.go, policy.go, clients.go);
// Observe's script (external.go) of the endpoints to advertise
// (endpoints.go, node.go, awscheck.go), the replica's device (device.go),
// its reachability (reachability.go, probers.go, probequeue.go) and
// traffic (traffic.go), and the key it logs in with (authkey.go,
// mintbudget.go); what it keeps of Secrets (secretcache.go); condition
// messages that do not change between attempts (stable.go); the reconcile
// rate, shared fairly between namespaces (fairlimit.go); metrics
// (metrics.go).
package relayconfig
