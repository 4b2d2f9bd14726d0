package fn

import (
	"crypto/sha256"
	"sync"

	"github.com/crossplane/function-sdk-go/resource/composed"
)

// maxCached and maxCachedBytes bound the cache: one entry per distinct
// PeerRelay seen, dropped wholesale when either bound is reached, so memory
// stays bounded however many, or however large, the PeerRelays tenants
// write. An entry's size is estimated, without encoding its objects again,
// as its inputs' encoded size plus fixedObjectSize once per object and
// once for the relay: every object carries at most what the spec says
// beside what every relay has (TestCacheSizeEstimate). The estimate is
// generous (several times the encoded size); maxCachedBytes lets 4096
// ordinary PeerRelays in, and far fewer hostile ones.
const (
	maxCached       = 4096
	maxCachedBytes  = 256 << 20
	fixedObjectSize = 8 << 10
)

// composition is what a PeerRelay composes: the relay with its defaults
// and every object. Entries are shared between calls and never modified.
type composition struct {
	relay *relay
	objs  []composedObject
	// awsKeys are the keys of objs' AWS managed resources, by replica
	// (awsKeysByReplica).
	awsKeys map[int][]string
}

type composedObject struct {
	key string
	obj *composed.Unstructured
	// templateHash is a StatefulSet's pod template hash (its
	// annotationPodTemplate), for the rollout.
	templateHash string
}

// compositionCache remembers compositions by their inputs (inputs.go).
// Crossplane calls the function on every reconcile of every XR, and what a
// PeerRelay composes changes far less often than that, so most calls skip
// building and converting objects.
type compositionCache struct {
	mu    sync.Mutex
	m     map[[sha256.Size]byte]*composition
	bytes int // the entries' estimated size
}

func (c *compositionCache) get(k [sha256.Size]byte) *composition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *compositionCache) put(k [sha256.Size]byte, v *composition, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > maxCachedBytes {
		return
	}
	if c.m == nil || len(c.m) >= maxCached || c.bytes+size > maxCachedBytes {
		c.m, c.bytes = make(map[[sha256.Size]byte]*composition), 0
	}
	if _, ok := c.m[k]; !ok {
		c.bytes += size
	}
	c.m[k] = v
}
