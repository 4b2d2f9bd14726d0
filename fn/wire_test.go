package fn

import (
	"net"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// TestWireServerSendsWhatFunctionReturns: over a real gRPC connection,
// WireServer's answer is exactly Function.RunFunction's, on the first
// (composing) call and on later (cached) ones, alongside another step's
// resources and for a spec the function rejects.
func TestWireServerSendsWhatFunctionReturns(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fnv1.RegisterFunctionRunnerServiceServer(srv, WireServer{Function: &Function{Log: logging.NewNopLogger()}})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := fnv1.NewFunctionRunnerServiceClient(conn)

	earlier, err := structpb.NewStruct(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "from-an-earlier-step"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		req    func() *fnv1.RunFunctionRequest
	}{
		"Replicas": {
			reason: "a plain PeerRelay",
			req: func() *fnv1.RunFunctionRequest {
				return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 3")}}
			},
		},
		"EarlierStep": {
			reason: "another step's desired resources travel as they came",
			req: func() *fnv1.RunFunctionRequest {
				return &fnv1.RunFunctionRequest{
					Observed: &fnv1.State{Composite: xr(t, "replicas: 2")},
					Desired:  &fnv1.State{Resources: map[string]*fnv1.Resource{"earlier": {Resource: earlier}}},
				}
			},
		},
		"EarlierStepSameKey": {
			reason: "our resource replaces an earlier step's under the same key, as it does in the map",
			req: func() *fnv1.RunFunctionRequest {
				return &fnv1.RunFunctionRequest{
					Observed: &fnv1.State{Composite: xr(t, "replicas: 2")},
					Desired:  &fnv1.State{Resources: map[string]*fnv1.Resource{keyServiceAccount: {Resource: earlier}}},
				}
			},
		},
		"Endpoints": {
			reason: "status lists written for the wire: endpoints, replicas with endpoints, and an earlier step's status kept",
			req: func() *fnv1.RunFunctionRequest {
				cfg := "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  conditions: [{type: Ready, status: \"True\", reason: Available, lastTransitionTime: \"2026-01-01T00:00:00Z\"}]\n  atProvider:\n    endpoints: [\"198.51.100.1:41641\", \"198.51.100.2:41641\"]"
				return &fnv1.RunFunctionRequest{
					Observed: &fnv1.State{Composite: xr(t, "replicas: 2"), Resources: map[string]*fnv1.Resource{
						"relayconfig-0": {Resource: mustStruct(t, cfg)},
					}},
					Desired: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, "status: {fromEarlierStep: true}")}},
				}
			},
		},
		"Invalid": {
			reason: "a rejected spec has no composition to encode",
			req: func() *fnv1.RunFunctionRequest {
				return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: -1")}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, call := range []string{"composing", "cached"} {
				want, err := (&Function{Log: logging.NewNopLogger()}).RunFunction(t.Context(), tc.req())
				if err != nil {
					t.Fatal(err)
				}
				got, err := client.RunFunction(t.Context(), tc.req())
				if err != nil {
					t.Fatal(err)
				}
				if len(want.GetDesired().GetResources()) == 0 && name != "Invalid" {
					t.Fatalf("%s: the function composed nothing", tc.reason)
				}
				// Readiness travels in the encoded entries too: make sure it is there to check.
				if name == "Replicas" && want.GetDesired().GetResources()[keyServiceAccount].GetReady() == fnv1.Ready_READY_UNSPECIFIED {
					t.Fatalf("%s: no readiness to compare", tc.reason)
				}
				if st := want.GetDesired().GetComposite().GetResource().GetFields()["status"].GetStructValue().GetFields(); name == "Endpoints" &&
					(len(st["endpoints"].GetListValue().GetValues()) != 2 || st["fromEarlierStep"] == nil) {
					t.Fatalf("%s: no endpoints or earlier status to compare: %v", tc.reason, st)
				}
				if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
					t.Errorf("%s (%s call): gRPC answer differs from RunFunction's (-RunFunction +gRPC):\n%s", tc.reason, call, diff)
				}
			}
		})
	}
}

// TestEncodedStatusRefusesWhatProtobufRefuses: a status string that is not
// valid UTF-8 fails the same way encoded or not, instead of reaching the
// wire where Crossplane could not decode it.
func TestEncodedStatusRefusesWhatProtobufRefuses(t *testing.T) {
	st := v1alpha1.PeerRelayStatus{Replicas: []v1alpha1.ReplicaStatus{{Index: 0, Hostname: "relay-\xff"}}}
	for _, encoded := range []bool{false, true} {
		err := setStatus(&fnv1.RunFunctionResponse{}, st, encoded)
		if err == nil || !strings.Contains(err.Error(), "status.replicas") {
			t.Errorf("encoded=%v: want an error naming status.replicas, got %v", encoded, err)
		}
	}
}
