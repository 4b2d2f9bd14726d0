// Package apis holds the API types of peerrelay: the PeerRelay composite
// resource (peerrelay/v1alpha1), the composition function's Input
// (fn/v1alpha1) and the provider's managed resources (relay/v1alpha1).
// `make generate` writes their deepcopy methods, CRDs and XRDs.
package apis
