// Package endpoint is the list of ip:port pairs a relay advertises: parsed,
// in one canonical order, and formatted.
package endpoint

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/peerrelay/peerrelay/apis/relay/static"
)

// Parse parses ip:port strings, the list at field; an IPv4-mapped IPv6
// address is taken as the IPv4 address.
func Parse(field string, eps []string) ([]netip.AddrPort, error) {
	out := make([]netip.AddrPort, 0, len(eps))
	for i, ep := range eps {
		ap, err := netip.ParseAddrPort(ep)
		if err != nil || ap.Port() == 0 {
			return nil, fmt.Errorf("%s[%d]: %q must be ip:port with a non-zero port", field, i, ep)
		}
		out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	return out, nil
}

// ParseStatic parses a replica's static endpoints, the list at field, with
// the PeerRelay's bounds, which the provider keeps for a RelayConfig too
// (one written before its schema had them, or by a tenant who may write
// RelayConfigs): the prober sends to each, so at most
// static.MaxEndpoints, and no link-local (the cloud's metadata
// service), multicast or unspecified address. Loopback, which the
// function refuses in a PeerRelay, is left to a RelayConfig: from the
// provider it reaches only the provider's own pod.
func ParseStatic(field string, eps []string) ([]netip.AddrPort, error) {
	if len(eps) > static.MaxEndpoints {
		return nil, fmt.Errorf("%s: %d entries, at most %d", field, len(eps), static.MaxEndpoints)
	}
	out, err := Parse(field, eps)
	if err != nil {
		return nil, err
	}
	for i, ap := range out {
		if a := ap.Addr(); !a.IsLoopback() && !static.AddrAllowed(a) {
			return nil, fmt.Errorf("%s[%d]: %q is not a unicast address peers can reach (link-local, multicast and unspecified addresses are refused)", field, i, eps[i])
		}
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
