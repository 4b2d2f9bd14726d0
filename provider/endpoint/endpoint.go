// Package endpoint is the list of ip:port pairs a relay advertises: parsed,
// in one canonical order, and formatted.
package endpoint

import (
	"fmt"
	"net/netip"
	"slices"
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
