// Package endpoint is the list of ip:port pairs a relay advertises: parsed,
// in one canonical order, and formatted.
package endpoint

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Parse parses ip:port strings, the list at field; an IPv4-mapped IPv6
// address is taken as the IPv4 address.
func Parse(field string, eps []string) ([]netip.AddrPort, error) {
	if len(eps) > v1alpha1.MaxStaticEndpoints {
		return nil, fmt.Errorf("%s: %d entries, at most %d", field, len(eps), v1alpha1.MaxStaticEndpoints)
	}
	out := make([]netip.AddrPort, 0, len(eps))
	for i, ep := range eps {
		ap, err := netip.ParseAddrPort(ep)
		if err != nil || ap.Port() == 0 {
			return nil, fmt.Errorf("%s[%d]: %q must be ip:port with a non-zero port", field, i, ep)
		}
		if !v1alpha1.StaticAddrAllowed(ap.Addr()) {
			return nil, fmt.Errorf("%s[%d]: %q is not a unicast address peers can reach (loopback, link-local, multicast and unspecified addresses are refused)", field, i, ep)
		}
		out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	return out, nil
}

// Normalize sorts and de-duplicates endpoints, in place.
func Normalize(eps []netip.AddrPort) []netip.AddrPort {
	slices.SortFunc(eps, netip.AddrPort.Compare)
	return slices.Compact(eps)
}

// Strings formats endpoints as ip:port.
func Strings(eps []netip.AddrPort) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.String()
	}
	return out
}
