package e2e

import (
	"encoding/json"
	"net/netip"

	"tailscale.com/ipn"
)

type netipAddr = netip.Addr

func parse(b []byte) (ipn.ConfigVAlpha, error) {
	var c ipn.ConfigVAlpha
	err := json.Unmarshal(b, &c)
	return c, err
}
