package tsconfig

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"tailscale.com/ipn"
	"tailscale.com/ipn/conffile"
	"tailscale.com/tailcfg"
)

func TestRender(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     Relay
		want   ipn.ConfigVAlpha
	}{
		"SortedDeduplicated": {
			reason: "Endpoints are sorted and de-duplicated so equal sets render equal bytes.",
			in: Relay{Hostname: "r-0", Port: 41641, AuthKey: "file:/etc/tailscale/authkey/authkey", Endpoints: []netip.AddrPort{
				netip.MustParseAddrPort("203.0.113.9:41641"), netip.MustParseAddrPort("198.51.100.1:41641"), netip.MustParseAddrPort("203.0.113.9:41641"),
			}},
			want: ipn.ConfigVAlpha{
				Version: "alpha0", Locked: "false", Hostname: ptr("r-0"), AcceptDNS: "false", AcceptRoutes: "false",
				AuthKey: ptr("file:/etc/tailscale/authkey/authkey"), RelayServerPort: ptr(uint16(41641)),
				RelayServerStaticEndpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:41641"), netip.MustParseAddrPort("203.0.113.9:41641")},
			},
		},
		"NoEndpointsYet": {
			reason: "Before the load balancer has an address the relay still runs, with no static endpoints.",
			in:     Relay{Hostname: "r-1", Port: 7000, ServerURL: "http://127.0.0.1:9911"},
			want: ipn.ConfigVAlpha{
				Version: "alpha0", Locked: "false", Hostname: ptr("r-1"), AcceptDNS: "false", AcceptRoutes: "false",
				RelayServerPort: ptr(uint16(7000)), ServerURL: ptr("http://127.0.0.1:9911"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, hash, err := Render(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got ipn.ConfigVAlpha
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if len(hash) != 64 {
				t.Errorf("hash %q is not a sha256", hash)
			}
			// tailscaled's own loader must accept it: unknown keys make it exit.
			path := t.TempDir() + "/" + FileName
			if err := writeFile(path, b); err != nil {
				t.Fatal(err)
			}
			cf, err := conffile.Load(path)
			if err != nil {
				t.Fatalf("tailscaled's conffile.Load rejects our file: %v\n%s", err, b)
			}
			if *cf.Parsed.RelayServerPort != tc.in.Port {
				t.Errorf("conffile sees RelayServerPort %d, want %d", *cf.Parsed.RelayServerPort, tc.in.Port)
			}
		})
	}
	if !strings.HasPrefix(FileName, "cap-") || !strings.HasSuffix(FileName, ".hujson") {
		t.Errorf("FileName %q is not cap-N.hujson", FileName)
	}
}

func ptr[T any](v T) *T { return &v }

// TestFileNameIsReadable: the config file's capability version is one the
// pinned tailscaled reads (the newest file not newer than its own), so the
// tailscale.com this module pins understands every field we write.
func TestFileNameIsReadable(t *testing.T) {
	if tailcfg.CurrentCapabilityVersion < MinCapabilityVersion {
		t.Fatalf("cap-%d.hujson is newer than the pinned tailscaled (%d): it would find no config", MinCapabilityVersion, tailcfg.CurrentCapabilityVersion)
	}
	if FileName != "cap-142.hujson" {
		t.Errorf("FileName %q", FileName)
	}
}
