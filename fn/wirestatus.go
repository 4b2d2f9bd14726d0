package fn

import (
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// The status lists change with what is observed, so they cannot come from
// the cache; but protobuf encodes a Struct's map by reflection, which made
// the status most of what a cached call costs. For the gRPC server they are
// encoded here directly, into Values that carry their encoding as unknown
// fields (as the cached objects do, wire.go).

// encodedStatusLists returns status.endpoints and status.replicas as
// Values that are empty in process and st's lists on the wire.
func encodedStatusLists(st v1alpha1.PeerRelayStatus) (endpoints, replicas *structpb.Value) {
	eps := make([][]byte, len(st.Endpoints))
	for i, e := range st.Endpoints {
		var f []byte
		f = appendField(f, "replica", wireNumber(float64(e.Replica)))
		f = appendField(f, "address", wireString(e.Address))
		f = appendField(f, "port", wireNumber(float64(e.Port)))
		eps[i] = wireStruct(f)
	}
	reps := make([][]byte, len(st.Replicas))
	for i, r := range st.Replicas {
		var f []byte
		f = appendField(f, "index", wireNumber(float64(r.Index)))
		f = appendField(f, "hostname", wireString(r.Hostname))
		f = appendField(f, "podReady", wireBool(r.PodReady))
		if len(r.Endpoints) > 0 {
			list := make([][]byte, len(r.Endpoints))
			for j, ep := range r.Endpoints {
				list[j] = wireString(ep)
			}
			f = appendField(f, "endpoints", wireList(list))
		}
		reps[i] = wireStruct(f)
	}
	return encodedValue(wireList(eps)), encodedValue(wireList(reps))
}

// validUTF8 reports whether every string in st is valid UTF-8, as
// protobuf requires and encodedStatusLists does not check.
func validUTF8(st v1alpha1.PeerRelayStatus) bool {
	for _, e := range st.Endpoints {
		if !utf8.ValidString(e.Address) {
			return false
		}
	}
	for _, r := range st.Replicas {
		if !utf8.ValidString(r.Hostname) {
			return false
		}
		for _, ep := range r.Endpoints {
			if !utf8.ValidString(ep) {
				return false
			}
		}
	}
	return true
}

// encodedValue is a Value that is raw, an encoded Value, on the wire.
func encodedValue(raw []byte) *structpb.Value {
	v := &structpb.Value{}
	v.ProtoReflect().SetUnknown(raw)
	return v
}

// appendField appends one entry of a Struct's fields map, value an
// encoded Value.
func appendField(b []byte, key string, value []byte) []byte {
	return append(appendMapEntryHead(b, structFields, key, len(value)), value...)
}

// The encoded Values of each kind.

func wireNumber(n float64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(nil, valueNumber, protowire.Fixed64Type), math.Float64bits(n))
}

func wireString(s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, valueString, protowire.BytesType), s)
}

func wireBool(v bool) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, valueBool, protowire.VarintType), protowire.EncodeBool(v))
}

// wireStruct is the Value holding a Struct whose encoded fields are fields.
func wireStruct(fields []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, valueStruct, protowire.BytesType), fields)
}

func wireList(values [][]byte) []byte {
	var l []byte
	for _, v := range values {
		l = protowire.AppendTag(l, listValues, protowire.BytesType)
		l = protowire.AppendBytes(l, v)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, valueList, protowire.BytesType), l)
}
