package relayconfig

import (
	"crypto/sha256"
	"strings"
	"sync"
)

// maxClients bounds the clients a clientCache keeps: one per set of
// settings in use, so more means settings changing; the cache then starts
// again.
const maxClients = 64

// clientCache keeps API clients across reconciles, one per set of settings
// (endpoint, account, credentials): a Tailscale API client holds its OAuth
// token until it expires, and an AWS configuration its credentials cache,
// so the provider asks for a token once an hour, not once per reconcile of
// every RelayConfig. New settings (a rotated Secret) are a new key, and a
// new client.
type clientCache[T any] struct {
	mu      sync.Mutex
	clients map[[sha256.Size]byte]T
}

// get returns the client for these settings, made by build when there is
// none yet.
func (c *clientCache[T]) get(settings []string, build func() (T, error)) (T, error) {
	key := sha256.Sum256([]byte(strings.Join(settings, "\x00")))
	c.mu.Lock()
	defer c.mu.Unlock()
	if client, ok := c.clients[key]; ok {
		return client, nil
	}
	client, err := build()
	if err != nil {
		return client, err
	}
	if c.clients == nil || len(c.clients) >= maxClients {
		c.clients = map[[sha256.Size]byte]T{}
	}
	c.clients[key] = client
	return client, nil
}
