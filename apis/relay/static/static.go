// Package static holds the bounds of a replica's static endpoints, shared
// by the function (a PeerRelay's spec.staticEndpoints) and the provider (a
// RelayConfig's spec.forProvider.staticEndpoints). It imports nothing but
// the standard library: the provider's endpoint parser, which is fuzzed,
// stays small.
package static

import "net/netip"

// MaxEndpoints bounds a replica's static endpoints, in the PeerRelay
// and the RelayConfig alike: the provider probes each.
const MaxEndpoints = 16

// AddrAllowed says whether a static endpoint may carry address a: a
// unicast address peers can reach (global or private), never loopback,
// link-local (the cloud's metadata service among them), multicast or
// unspecified, where the provider's prober would send on a tenant's word.
// The function's validation and the provider's parsing both use it.
func AddrAllowed(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() || a.IsPrivate()
}
