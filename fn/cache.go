package fn

import (
	"crypto/sha256"
	"sync"

	"github.com/crossplane/function-sdk-go/resource/composed"
)

// maxCached bounds the cache: one entry per distinct PeerRelay seen,
// dropped wholesale when full, so memory stays bounded.
const maxCached = 4096

// composition is what a PeerRelay composes: the relay with its defaults
// and every object. Entries are shared between calls and never modified.
type composition struct {
	relay *relay
	objs  []composedObject
}

type composedObject struct {
	key string
	obj *composed.Unstructured
}

// compositionCache remembers compositions by their inputs (inputs.go).
// Crossplane calls the function on every reconcile of every XR, and what a
// PeerRelay composes changes far less often than that, so most calls skip
// building and converting objects.
type compositionCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*composition
}

func (c *compositionCache) get(k [sha256.Size]byte) *composition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *compositionCache) put(k [sha256.Size]byte, v *composition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[[sha256.Size]byte]*composition)
	}
	c.m[k] = v
}
