package fn

import (
	"context"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Encoding the response is most of what a call costs over gRPC: a
// composed object is a tree of protobuf maps that must be sized and
// written anew on every call, although a cached composition's objects
// never change. So each cached object is encoded once, when it is
// composed, and served from those bytes.
//
// preEncoded returns a Struct with no fields whose unknown fields are s's
// encoding. On the wire it is byte for byte s; in process it looks empty,
// so it is only ever handed to the gRPC server (WireServer). RunFunction,
// whose caller reads the response, decodes it again (decode).
func preEncoded(s *structpb.Struct) (*structpb.Struct, error) {
	raw, err := proto.Marshal(s)
	if err != nil {
		return nil, err
	}
	w := &structpb.Struct{}
	w.ProtoReflect().SetUnknown(raw)
	return w, nil
}

// decode returns the object the cached encoding holds, as a new Struct.
func (o cachedObject) decode() (*structpb.Struct, error) {
	s := &structpb.Struct{}
	if err := proto.Unmarshal(o.wire.ProtoReflect().GetUnknown(), s); err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", o.key, err)
	}
	return s, nil
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
