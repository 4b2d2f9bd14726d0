package fn

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
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
	wire []byte
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

// cacheKey hashes the parts of a request a composition depends on.
func cacheKey(req *fnv1.RunFunctionRequest, aws *awsObserved) [sha256.Size]byte {
	xr := req.GetObserved().GetComposite().GetResource().GetFields()
	md := xr["metadata"].GetStructValue().GetFields()
	labels := md["labels"].GetStructValue().GetFields()
	b := make([]byte, 0, 512)
	for _, v := range []*structpb.Value{md["name"], md["namespace"], labels[labelClaimName], labels[labelClaimNamespace], xr["spec"]} {
		b = appendCanonical(b, v)
	}
	b = appendCanonicalStruct(b, req.GetInput())
	// The ProxyClass shapes the pods too, and whether it was looked up
	// yet decides what is required and warned of: "not asked yet" and
	// "asked, none found" are different keys. Of the CRD only its presence
	// counts.
	required := req.GetRequiredResources()
	for _, k := range []string{requiredProxyClassCRDKey, requiredProxyClassKey} {
		rs, asked := required[k]
		if !asked {
			b = append(b, 'a')
			continue
		}
		b = binary.AppendUvarint(append(b, 'r'), uint64(len(rs.GetItems())))
		if k == requiredProxyClassKey {
			for _, pc := range rs.GetItems() {
				b = appendCanonicalStruct(b, pc.GetResource())
			}
		}
	}
	// So does what was observed of the replicas' AWS placement.
	b = append(b, aws.key()...)
	return sha256.Sum256(b)
}

// appendCanonical appends an encoding of v that two values share only when
// they are equal: each value is tagged with its kind, strings and
// collections carry their length, and struct fields are sorted. (A
// deterministic protobuf encoding would do, at several times the cost: it
// sorts and walks the maps by reflection, on every call.)
func appendCanonical(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case nil:
		return append(b, 'z')
	case *structpb.Value_NullValue:
		return append(b, 'n')
	case *structpb.Value_BoolValue:
		if k.BoolValue {
			return append(b, 't')
		}
		return append(b, 'f')
	case *structpb.Value_NumberValue:
		return binary.BigEndian.AppendUint64(append(b, 'd'), math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		return appendCanonicalString(append(b, 's'), k.StringValue)
	case *structpb.Value_StructValue:
		return appendCanonicalStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = binary.AppendUvarint(append(b, 'l'), uint64(len(k.ListValue.GetValues())))
		for _, e := range k.ListValue.GetValues() {
			b = appendCanonical(b, e)
		}
		return b
	default:
		panic(fmt.Sprintf("unknown structpb kind %T", k))
	}
}

func appendCanonicalStruct(b []byte, s *structpb.Struct) []byte {
	if s == nil {
		return append(b, 'z')
	}
	b = binary.AppendUvarint(append(b, 'm'), uint64(len(s.GetFields())))
	for _, k := range slices.Sorted(maps.Keys(s.GetFields())) {
		b = appendCanonical(appendCanonicalString(b, k), s.GetFields()[k])
	}
	return b
}

func appendCanonicalString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
