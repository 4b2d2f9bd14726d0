package v1alpha1

import "net/netip"

// MaxStaticEndpoints bounds a replica's static endpoints, in the PeerRelay
// and the RelayConfig alike: the provider probes each.
const MaxStaticEndpoints = 16

// StaticAddrAllowed says whether a static endpoint may carry address a: a
// unicast address peers can reach (global or private), never loopback,
// link-local (the cloud's metadata service among them), multicast or
// unspecified, where the provider's prober would send on a tenant's word.
// The function's validation and the provider's parsing both use it.
func StaticAddrAllowed(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() || a.IsPrivate()
}
