package fn

import (
	"crypto/sha256"
	"sync"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// maxCached bounds the cache: one entry per distinct PeerRelay spec seen,
// dropped wholesale when full, so memory stays bounded.
const maxCached = 4096

// composition is what a PeerRelay's spec composes: the relay with its
// defaults and every object encoded for the wire (wire.go), ready for the
// response. Entries are shared between responses and never modified.
type composition struct {
	relay *relay
	objs  []cachedObject
}

type cachedObject struct {
	key string
	// wire is the object's encoding, computed once (see wire.go). Only the
	// bytes are kept: a tree of Structs per object would make a cache of
	// thousands of PeerRelays a heap the garbage collector must walk.
	wire *structpb.Struct
}

// compositionCache remembers compositions by everything they depend on: the
// XR's name, namespace, claim labels and spec, the Input, the ProxyClass and
// what was observed of the replicas' AWS placement. Crossplane
// calls the function on every reconcile of every XR, and a spec changes far
// less often than that, so most calls skip building and converting objects.
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

// cacheKey hashes the parts of a request a composition depends on. ok is
// false when they cannot be read; the caller then composes uncached.
func cacheKey(req *fnv1.RunFunctionRequest, aws *awsObserved) (k [sha256.Size]byte, ok bool) {
	xr := req.GetObserved().GetComposite().GetResource().GetFields()
	md := xr["metadata"].GetStructValue().GetFields()
	labels := md["labels"].GetStructValue().GetFields()
	key := &structpb.Struct{Fields: map[string]*structpb.Value{
		"name":      md["name"],
		"namespace": md["namespace"],
		"claimName": labels[labelClaimName],
		"claimNS":   labels[labelClaimNamespace],
		"spec":      xr["spec"],
	}}
	for k, v := range key.Fields {
		if v == nil {
			delete(key.Fields, k)
		}
	}
	opts := proto.MarshalOptions{Deterministic: true}
	a, err := opts.Marshal(key)
	if err != nil {
		return k, false
	}
	b, err := opts.Marshal(req.GetInput())
	if err != nil {
		return k, false
	}
	// The ProxyClass shapes the pods too.
	c, err := opts.Marshal(req.GetRequiredResources()[requiredProxyClassKey])
	if err != nil {
		return k, false
	}
	// So does what was observed of the replicas' AWS placement.
	h := sha256.New()
	for _, part := range [][]byte{a, b, c, aws.key()} {
		h.Write(part)
		h.Write([]byte{0})
	}
	copy(k[:], h.Sum(nil))
	return k, true
}
