// Package bench measures function-peerrelay against a peer, and the
// provider's ingress-to-config latency, in Go benchmarks. `make bench` runs
// them and compares with benchstat.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	fnv1beta1 "github.com/crossplane/function-sdk-go/proto/v1beta1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/peerrelay/peerrelay/fn"
	"github.com/peerrelay/peerrelay/test/harness"
)

func request(b testing.TB, replicas int, aws bool) *fnv1.RunFunctionRequest {
	b.Helper()
	spec := map[string]any{
		"replicas":         replicas,
		"tags":             []any{"tag:relay"},
		"authKeySecretRef": map[string]any{"name": "tailscale-auth"},
	}
	// The steady state: what the pods run as exists, so every StatefulSet is
	// composed; with Elastic IP pinning, the provider has checked every
	// replica's subnet and allocation, so every Service is composed.
	observed := map[string]*fnv1.Resource{}
	for key, kind := range map[string][2]string{"serviceaccount": {"v1", "ServiceAccount"}, "role": {"rbac.authorization.k8s.io/v1", "Role"}, "rolebinding": {"rbac.authorization.k8s.io/v1", "RoleBinding"}} {
		o, err := structpb.NewStruct(map[string]any{"apiVersion": kind[0], "kind": kind[1], "metadata": map[string]any{"name": "my-relay", "namespace": "team-a"}})
		if err != nil {
			b.Fatal(err)
		}
		observed[key] = &fnv1.Resource{Resource: o}
	}
	if aws {
		var eips []any
		for i := range replicas {
			alloc, subnet := fmt.Sprintf("eipalloc-%04x", i), fmt.Sprintf("subnet-%04x", i)
			eips = append(eips, map[string]any{"allocationID": alloc, "subnetID": subnet})
			rc, err := structpb.NewStruct(map[string]any{
				"apiVersion": "relay.peerrelay.io/v1alpha1", "kind": "RelayConfig",
				"metadata": map[string]any{"name": fmt.Sprintf("my-relay-%d", i), "namespace": "team-a"},
				"status": map[string]any{"atProvider": map[string]any{"aws": map[string]any{
					"checked": true, "subnetID": subnet, "allocationID": alloc, "zone": "eu-west-1a", "vpcID": "vpc-0abc",
				}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			observed[fmt.Sprintf("relayconfig-%d", i)] = &fnv1.Resource{Resource: rc}
		}
		spec["aws"] = map[string]any{"elasticIPs": eips}
	}
	xr, err := structpb.NewStruct(map[string]any{
		"apiVersion": "peerrelay.io/v1alpha1", "kind": "PeerRelay",
		"metadata": map[string]any{"name": "my-relay", "namespace": "team-a"},
		"spec":     spec,
	})
	if err != nil {
		b.Fatal(err)
	}
	return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}, Resources: observed}}
}

// BenchmarkRunFunction: in process, by replicas, with and without Elastic
// IP pinning. cache=cold composes from scratch every call (a new or changed
// spec); cache=warm is the steady state, where Crossplane calls again for
// an XR whose spec has not changed. Cost should grow linearly with replicas.
// It encodes the response, as the gRPC server does, so it measures the
// function's own work without the transport.
func BenchmarkRunFunction(b *testing.B) {
	for _, cache := range []string{"cold", "warm"} {
		for _, aws := range []bool{false, true} {
			for _, n := range []int{1, 3, 10, 100} {
				req := request(b, n, aws)
				warm := &fn.Function{Log: logging.NewNopLogger()}
				call := func(f *fn.Function) []byte {
					rsp, err := f.RunFunction(context.Background(), req)
					if err != nil {
						b.Fatal(err)
					}
					raw, err := proto.Marshal(rsp)
					if err != nil {
						b.Fatal(err)
					}
					return raw
				}
				got := &fnv1.RunFunctionResponse{}
				// SA, Role, RoleBinding; per replica StatefulSet, Service,
				// RelayConfig. No PodDisruptionBudget: the observed
				// StatefulSets report no pod yet.
				want := 3 + 3*n
				if err := proto.Unmarshal(call(warm), got); err != nil || len(got.GetDesired().GetResources()) != want {
					b.Fatalf("unexpected response: %v: %d resources, want %d; %v", err, len(got.GetDesired().GetResources()), want, got.GetResults())
				}
				b.Run(fmt.Sprintf("cache=%s/aws=%v/replicas=%d", cache, aws, n), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						f := warm
						if cache == "cold" {
							f = &fn.Function{Log: logging.NewNopLogger()}
						}
						call(f)
					}
				})
			}
		}
	}
}

// server is a function process and a connection to it.
type server struct {
	conn *grpc.ClientConn
	pid  int
}

// cpu returns the CPU time the process has used so far, from /proc: what a
// platform pays for the function, whatever the transport costs the caller.
func (s server) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// startReplay runs function-replay (test/bench/replay) answering every call
// with rsp.
func startReplay(b testing.TB, rsp *fnv1.RunFunctionResponse) server {
	b.Helper()
	raw, err := proto.Marshal(rsp)
	if err != nil {
		b.Fatal(err)
	}
	f := filepath.Join(b.TempDir(), "response.pb")
	if err := os.WriteFile(f, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	return startFunction(b, harness.Tool(b, "function-replay"), "--response", f)
}

// startFunction runs a function binary and connects to it.
func startFunction(b testing.TB, bin string, args ...string) server {
	b.Helper()
	p, addr := harness.StartFunctionBinary(b, bin, args...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return server{conn: conn, pid: p.Pid()}
}

// patchAndTransformRequest builds the request that makes
// function-patch-and-transform compose the same objects our function does:
// each of our outputs becomes a P&T base whose name and namespace are
// patched from the XR, as a P&T Composition would do it. (A real P&T
// Composition would patch more fields; this favours the peer.)
func patchAndTransformRequest(b testing.TB, ours *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest) *fnv1beta1.RunFunctionRequest {
	b.Helper()
	var resources []any
	for key, r := range ours.GetDesired().GetResources() {
		base := r.GetResource().AsMap()
		md := base["metadata"].(map[string]any)
		name := md["name"].(string)
		delete(md, "name")
		delete(md, "namespace")
		nameFmt := strings.Replace(name, "my-relay", "%s", 1)
		resources = append(resources, map[string]any{
			"name": key,
			"base": base,
			"patches": []any{
				map[string]any{"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.namespace", "toFieldPath": "metadata.namespace"},
				map[string]any{"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.name", "toFieldPath": "metadata.name",
					"transforms": []any{map[string]any{"type": "string", "string": map[string]any{"type": "Format", "fmt": nameFmt}}}},
			},
		})
	}
	in, err := structpb.NewStruct(map[string]any{"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": resources})
	if err != nil {
		b.Fatal(err)
	}
	// v1 and v1beta1 messages are the same on the wire.
	raw, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	out := &fnv1beta1.RunFunctionRequest{}
	if err := proto.Unmarshal(raw, out); err != nil {
		b.Fatal(err)
	}
	out.Input = in
	return out
}

// BenchmarkGRPC calls our function and function-patch-and-transform over
// gRPC on loopback, each as its own process, for the same objects
// (replicas=3). The peer's output is checked equal to ours first.
func BenchmarkGRPC(b *testing.B) {
	oursSrv := startFunction(b, harness.Tool(b, "function-peerrelay"), "--metrics-address=")
	peerSrv := startFunction(b, harness.Tool(b, "function-patch-and-transform"))
	ours := fnv1.NewFunctionRunnerServiceClient(oursSrv.conn)
	peer := fnv1beta1.NewFunctionRunnerServiceClient(peerSrv.conn)
	ctx := context.Background()

	for _, n := range []int{3, 10} {
		req := request(b, n, false)
		want, err := ours.RunFunction(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		preq := patchAndTransformRequest(b, want, req)
		got, err := peer.RunFunction(ctx, preq)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range got.GetResults() {
			if r.GetSeverity() == fnv1beta1.Severity_SEVERITY_FATAL {
				b.Fatalf("patch-and-transform: %s", r.GetMessage())
			}
		}
		if len(got.GetDesired().GetResources()) != len(want.GetDesired().GetResources()) {
			b.Fatalf("the peer composed %d resources, ours %d", len(got.GetDesired().GetResources()), len(want.GetDesired().GetResources()))
		}
		for key, w := range want.GetDesired().GetResources() {
			g := got.GetDesired().GetResources()[key]
			if diff := cmp.Diff(w.GetResource().AsMap(), g.GetResource().AsMap()); diff != "" {
				b.Fatalf("the peer's %s differs from ours (-ours +peer):\n%s", key, diff)
			}
		}
		// The floor: a function that does no work and answers with our
		// response, recorded. Neither function can cost less than it.
		floorSrv := startReplay(b, want)
		floor := fnv1.NewFunctionRunnerServiceClient(floorSrv.conn)
		timeCalls(b, fmt.Sprintf("fn=floor/replicas=%d", n), floorSrv, func() error {
			_, err := floor.RunFunction(ctx, req)
			return err
		})
		timeCalls(b, fmt.Sprintf("fn=peerrelay/replicas=%d", n), oursSrv, func() error {
			_, err := ours.RunFunction(ctx, req)
			return err
		})
		// Every call a spec the function has not seen (a new hostnamePrefix),
		// so none is answered from its composition cache: what a changed
		// PeerRelay costs. The output differs from the peer's only in hostnames.
		cold := make([]*fnv1.RunFunctionRequest, 5000) // more than the cache holds
		for i := range cold {
			cold[i] = request(b, n, false)
			cold[i].GetObserved().GetComposite().GetResource().GetFields()["spec"].GetStructValue().GetFields()["hostnamePrefix"] = structpb.NewStringValue(fmt.Sprintf("relay-%d", i))
		}
		// i carries on across -count runs, which share the process: a request
		// comes round again only after the cache (4,096) has been emptied.
		i := 0
		timeCalls(b, fmt.Sprintf("fn=peerrelay-uncached/replicas=%d", n), oursSrv, func() error {
			_, err := ours.RunFunction(ctx, cold[i%len(cold)])
			i++
			return err
		})
		timeCalls(b, fmt.Sprintf("fn=patch-and-transform/replicas=%d", n), peerSrv, func() error {
			_, err := peer.RunFunction(ctx, preq)
			return err
		})
	}
}

// timeCalls runs a sub-benchmark of call against srv. ns/op is the
// caller's wall time, transport included; server-cpu-ns/op is the function
// process's own CPU per call.
func timeCalls(b *testing.B, name string, srv server, call func() error) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		before := srv.cpu(b)
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(srv.cpu(b)-before)/float64(b.N), "server-cpu-ns/op")
	})
}
