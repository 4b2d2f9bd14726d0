// Package relayconfig is the RelayConfig controller: it resolves one relay
// replica's public endpoints and writes its tailscaled config Secret.
//
// It runs on crossplane-runtime's managed reconciler, and leaves the
// reconciler's grain in four places. Each saves writes to the RelayConfig:
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
//  2. No external-name initializer (setup.go, reconcilerOptions): the
//     config Secret is named by spec.forProvider.configSecretName, and the
//     annotation would be one more write. Check: NoExternalName.
//  3. The finalizer keeps the observation (finalizer.go): the Update that
//     adds it loads the stored object back, status included, and the
//     reconcile's status write would then need a second reconcile. Check:
//     StatusKeptAcrossFinalizer.
//  4. The external client is made per reconcile and carries what Observe
//     found (the rendered config, a missing state Secret, a key to mint)
//     to Update (external.go, the fields after api). Update writes exactly
//     the config Observe compared, and nothing is resolved twice. Check:
//     ObserveHandsOverToUpdate.
package relayconfig
