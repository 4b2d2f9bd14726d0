package e2e

import (
	"encoding/json"

	"tailscale.com/ipn"
)

func parse(b []byte) (ipn.ConfigVAlpha, error) {
	var c ipn.ConfigVAlpha
	err := json.Unmarshal(b, &c)
	return c, err
}
