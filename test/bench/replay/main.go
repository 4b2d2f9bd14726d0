// Command function-replay is the benchmarks' floor: a composition function
// that does no work. It serves, through the same function-sdk-go server as
// function-peerrelay, one recorded response to every call, sent from its
// encoding as it was read. What a call to it costs is what any function
// returning that output costs in gRPC, request decoding and transport alone.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	function "github.com/crossplane/function-sdk-go"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// replay answers every call with the same encoded response.
type replay struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	rsp *fnv1.RunFunctionResponse
}

func (r replay) RunFunction(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return r.rsp, nil
}

func main() {
	address := flag.String("address", "127.0.0.1:9443", "address to listen on")
	response := flag.String("response", "", "file holding the binary protobuf RunFunctionResponse to send")
	flag.Bool("insecure", true, "always insecure; accepted so it starts like a function")
	flag.Parse()

	raw, err := os.ReadFile(*response)
	if err != nil {
		log.Fatal(err)
	}
	// A message with only unknown fields is written out byte for byte: the
	// response costs a copy, not an encoding.
	rsp := &fnv1.RunFunctionResponse{}
	rsp.ProtoReflect().SetUnknown(raw)

	log.Fatal(function.Serve(replay{rsp: rsp},
		function.Listen("tcp", *address),
		function.Insecure(true)))
}
