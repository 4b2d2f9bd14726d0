// Package tsconfig renders the tailscaled config file a relay replica runs
// with: ipn.ConfigVAlpha from tailscale.com, marshalled by its own type so
// key names and spellings are tailscaled's, never ours.
package tsconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"tailscale.com/ipn"
	"tailscale.com/tailcfg"

	"github.com/peerrelay/peerrelay/provider/endpoint"
)

// MinCapabilityVersion is the first capability version (tailscale v1.102)
// whose tailscaled reads RelayServerPort and RelayServerStaticEndpoints
// from its config file, which rejects fields it does not know.
const MinCapabilityVersion tailcfg.CapabilityVersion = 142

// FileName is the config Secret key: containerboot reads the newest
// cap-<N>.hujson not newer than its own capability version, so a file named
// for the oldest version that understands it is read by every image from
// v1.102 on, including images newer than the tailscale.com this module pins.
var FileName = fmt.Sprintf("cap-%d.hujson", MinCapabilityVersion)

// Relay is what one replica's config says.
type Relay struct {
	Hostname string
	Port     uint16
	// Endpoints advertised as relay static endpoints; sorted and
	// de-duplicated on render.
	Endpoints []netip.AddrPort
	// AuthKey is the key itself or "file:<path>".
	AuthKey string
	// ServerURL of the control server; empty for Tailscale's.
	ServerURL string
}

// Render returns the config file's bytes and their sha256. Every field we
// own is written explicitly: a reloaded config replaces the relay settings
// wholesale, and an omitted AcceptDNS means true.
func Render(r Relay) ([]byte, string, error) {
	eps := endpoint.Normalize(slices.Clone(r.Endpoints))
	c := ipn.ConfigVAlpha{
		Version:                    "alpha0",
		Locked:                     "false",
		Hostname:                   &r.Hostname,
		AcceptDNS:                  "false",
		AcceptRoutes:               "false",
		RelayServerPort:            &r.Port,
		RelayServerStaticEndpoints: eps,
	}
	if r.AuthKey != "" {
		c.AuthKey = &r.AuthKey
	}
	if r.ServerURL != "" {
		c.ServerURL = &r.ServerURL
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, "", fmt.Errorf("cannot marshal the tailscaled config: %w", err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}
