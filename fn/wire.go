package fn

import (
	"context"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// Encoding the response is most of what a call costs over gRPC: a
// composed object is a tree of protobuf maps that must be sized and
// written anew on every call, although a cached composition's objects
// never change. So each cached object is encoded once, when it is
// composed, and WireServer writes the desired resources from those bytes:
// each becomes one entry of State.resources, appended to the desired
// State's unknown fields, which protobuf writes out as they are. On the
// wire that is the same message as a filled-in map. RunFunction, whose
// caller reads the response, decodes the objects again instead.

// The field numbers encoded here and in wirestatus.go, from the descriptors.
var (
	stateResources   = fieldNumber(&fnv1.State{}, "resources")
	resourceResource = fieldNumber(&fnv1.Resource{}, "resource")
	resourceReady    = fieldNumber(&fnv1.Resource{}, "ready")
	structFields     = fieldNumber(&structpb.Struct{}, "fields")
	listValues       = fieldNumber(&structpb.ListValue{}, "values")
	valueNumber      = fieldNumber(&structpb.Value{}, "number_value")
	valueString      = fieldNumber(&structpb.Value{}, "string_value")
	valueBool        = fieldNumber(&structpb.Value{}, "bool_value")
	valueStruct      = fieldNumber(&structpb.Value{}, "struct_value")
	valueList        = fieldNumber(&structpb.Value{}, "list_value")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic(fmt.Sprintf("%s has no field %s", m.ProtoReflect().Descriptor().FullName(), name))
	}
	return f.Number()
}

// decode returns the object the cached encoding holds, as a new Struct.
func (o cachedObject) decode() (*structpb.Struct, error) {
	s := &structpb.Struct{}
	if err := proto.Unmarshal(o.wire, s); err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", o.key, err)
	}
	return s, nil
}

// appendMapEntryHead appends the start of one entry of the map in field
// of a message, up to the value's bytes, which the caller appends next:
// {1: key, 2: a value of valueLen bytes}.
func appendMapEntryHead(b []byte, field protowire.Number, key string, valueLen int) []byte {
	entryLen := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeBytes(valueLen)
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entryLen))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(valueLen))
}

// appendEncoded adds the objects to the desired State as encoded map
// entries, each with its readiness. An earlier step's resource under one of
// our keys is dropped from the map: ours replaces it, as it would in the map.
func appendEncoded(desired *fnv1.State, objs []cachedObject, ready func(key string) fnv1.Ready) {
	size := 0
	for _, o := range objs {
		size += len(o.key) + len(o.wire) + 32 // 5 tags and 4 lengths at most
	}
	b := make([]byte, 0, len(desired.ProtoReflect().GetUnknown())+size)
	b = append(b, desired.ProtoReflect().GetUnknown()...)
	for _, o := range objs {
		delete(desired.Resources, o.key)
		// Resource: {resource: the object, ready}.
		resLen := protowire.SizeTag(resourceResource) + protowire.SizeBytes(len(o.wire))
		rd := ready(o.key)
		if rd != fnv1.Ready_READY_UNSPECIFIED {
			resLen += protowire.SizeTag(resourceReady) + protowire.SizeVarint(uint64(rd))
		}
		b = appendMapEntryHead(b, stateResources, o.key, resLen)
		b = protowire.AppendTag(b, resourceResource, protowire.BytesType)
		b = protowire.AppendBytes(b, o.wire)
		if rd != fnv1.Ready_READY_UNSPECIFIED {
			b = protowire.AppendTag(b, resourceReady, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(rd))
		}
	}
	desired.ProtoReflect().SetUnknown(b)
}

// WireServer serves a Function over gRPC, sending each composed object
// from the encoding computed when it was composed. What reaches the caller
// is the same message Function.RunFunction returns.
type WireServer struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	Function *Function
}

// RunFunction composes one PeerRelay for a gRPC caller.
func (s WireServer) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return s.Function.run(req, true), nil
}
