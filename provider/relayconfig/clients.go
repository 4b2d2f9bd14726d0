package relayconfig

import (
	"crypto/sha256"
	"strings"
	"sync"

	"k8s.io/utils/lru"
)

// maxClients bounds the clients a clientCache keeps: one per set of
// settings in use. Past it the least recently used goes, so a tenant
// cycling through regions or Secrets costs only its own clients, not
// everyone's.
const maxClients = 64

// clientCache keeps API clients across reconciles, one per set of settings
// (endpoint, account, credentials): a Tailscale API client holds its OAuth
// token until it expires, and an AWS configuration its credentials cache,
// so the provider asks for a token once an hour, not once per reconcile of
// every RelayConfig. New settings (a rotated Secret) are a new key, and a
// new client.
type clientCache[T any] struct {
	mu      sync.Mutex // held across build: one client per settings
	clients *lru.Cache
}

// get returns the client for these settings, made by build when there is
// none yet.
func (c *clientCache[T]) get(settings []string, build func() (T, error)) (T, error) {
	key := sha256.Sum256([]byte(strings.Join(settings, "\x00")))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = lru.New(maxClients)
	}
	if client, ok := c.clients.Get(key); ok {
		return client.(T), nil
	}
	client, err := build()
	if err != nil {
		return client, err
	}
	c.clients.Add(key, client)
	return client, nil
}
