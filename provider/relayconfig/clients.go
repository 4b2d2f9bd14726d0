package relayconfig

import (
	"crypto/sha256"
	"sync"

	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// maxClients bounds the Tailscale API clients kept: one per OAuth client
// and tailnet in use, so more means credentials changing; the cache then
// starts again.
const maxClients = 64

// apiClients keeps one Tailscale API client per base URL, tailnet and OAuth
// client, across reconciles: a client holds its OAuth token until it
// expires, so the provider asks for a token once an hour, not once per
// reconcile of every RelayConfig. New credentials are a new key, and a new
// client.
type apiClients struct {
	mu      sync.Mutex
	clients map[[sha256.Size]byte]tailnet.API
}

// get returns the client for these settings, made by newAPI when there is
// none yet.
func (c *apiClients) get(baseURL, tailnetName, id, secret string, newAPI func(baseURL, tailnet, id, secret string) (tailnet.API, error)) (tailnet.API, error) {
	key := sha256.Sum256([]byte(baseURL + "\x00" + tailnetName + "\x00" + id + "\x00" + secret))
	c.mu.Lock()
	defer c.mu.Unlock()
	if api, ok := c.clients[key]; ok {
		return api, nil
	}
	api, err := newAPI(baseURL, tailnetName, id, secret)
	if err != nil {
		return nil, err
	}
	if c.clients == nil || len(c.clients) >= maxClients {
		c.clients = map[[sha256.Size]byte]tailnet.API{}
	}
	c.clients[key] = api
	return api, nil
}
