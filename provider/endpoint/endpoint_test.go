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
