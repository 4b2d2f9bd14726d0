package endpoint

import (
	"net/netip"
	"slices"
	"testing"
)

// FuzzParse: any input either fails with an error or yields
// endpoints that round-trip, and Normalize leaves them sorted and unique.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"198.51.100.1:41641", "[2001:db8::1]:1", "::ffff:1.2.3.4", "[::ffff:1.2.3.4]:9", "host:1", "1.2.3.4:0", ""} {
		f.Add(s, "203.0.113.9:41641")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		eps, err := Parse("staticEndpoints", []string{a, b, a})
		if err != nil {
			return
		}
		for _, e := range eps {
			if e.Port() == 0 || !e.IsValid() {
				t.Fatalf("invalid endpoint %v from %q, %q", e, a, b)
			}
			back, err := netip.ParseAddrPort(e.String())
			if err != nil || back != e {
				t.Fatalf("%v does not round-trip: %v %v", e, back, err)
			}
		}
		n := Normalize(eps)
		if len(n) > 2 || !slices.IsSortedFunc(n, func(x, y netip.AddrPort) int { return x.Compare(y) }) {
			t.Fatalf("Normalize(%v) = %v: not sorted and unique", eps, n)
		}
	})
}

// TestParseStaticBounds: the provider carries the PeerRelay's bounds for a
// RelayConfig's static endpoints too (one written before the schema had
// them, or by a tenant who may write RelayConfigs): the prober sends to
// each, so none on link-local (the metadata service) or multicast, and at
// most 16.
func TestParseStaticBounds(t *testing.T) {
	many := make([]string, 17)
	for i := range many {
		many[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 41641).String()
	}
	cases := map[string]struct {
		reason string
		eps    []string
		ok     bool
	}{
		"Public":    {reason: "A public address is advertised.", eps: []string{"203.0.113.9:41641"}, ok: true},
		"Private":   {reason: "A private one too (a port-forwarded homelab's LAN).", eps: []string{"10.0.0.7:41641"}, ok: true},
		"Metadata":  {reason: "The cloud's metadata address is link-local: refused.", eps: []string{"169.254.169.254:80"}},
		"Loopback":  {reason: "Loopback reaches only the provider's own pod: left to a RelayConfig (the function refuses it in a PeerRelay).", eps: []string{"127.0.0.1:41641"}, ok: true},
		"Multicast": {reason: "Multicast reaches no one peer: refused.", eps: []string{"[ff02::1]:41641"}},
		"MappedV4":  {reason: "An IPv4-mapped link-local address is link-local.", eps: []string{"[::ffff:169.254.169.254]:80"}},
		"TooMany":   {reason: "Seventeen entries are one too many.", eps: many},
		"Sixteen":   {reason: "Sixteen are the most.", eps: many[:16], ok: true},
	}
	if _, err := Parse("status.atProvider.endpoints", many); err != nil {
		t.Errorf("the bounds hold for static endpoints only, not for what a replica advertises: %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseStatic("spec.forProvider.staticEndpoints", tc.eps)
			if (err == nil) != tc.ok {
				t.Errorf("%s\nParse(%v): %v", tc.reason, tc.eps, err)
			}
		})
	}
}
