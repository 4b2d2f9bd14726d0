package fn

import (
	"context"
	"regexp"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

var dns1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// FuzzRunFunction feeds random XR names and specs (as JSON) to RunFunction:
// it must never panic, and must answer either a Fatal result or objects
// whose names Kubernetes accepts.
func FuzzRunFunction(f *testing.F) {
	for _, seed := range []struct{ name, spec string }{
		{"my-relay", `{"replicas":3,"authKeySecretRef":{"name":"ts-auth"}}`},
		{"r", `{"replicas":2,"aws":{"elasticIPs":[{"allocationID":"eipalloc-0a","subnetID":"subnet-0a"},{"allocationID":"eipalloc-0b","subnetID":"subnet-0b"}]}}`},
		{"r", `{"replicas":2,"aws":{"region":"eu-west-1","loadBalancer":"Managed","zonePlacement":"PerReplica","elasticIPs":[{"subnetID":"subnet-0a","allocate":true,"zone":"eu-west-1a"},{"subnetID":"subnet-0b","allocate":true}]}}`},
		{"r", `{"replicas":3,"aws":{"region":"eu-west-1","subnets":["subnet-0a","subnet-0b"],"allocate":true}}`},
		{"x.y", `{"tags":["tag:a","tag:b"],"staticEndpoints":["[2001:db8::1]:1"],"port":7}`},
		{"9-lives", `{"replicas":"3"}`},
		{"a-very-long-name-a-very-long-name-a-very-long-name-a-very-long-name", `{"hostnamePrefix":"abc","service":{"annotations":{"k":"v"}}}`},
		{"e", `[]`},
		{"e", `{"pod":{"image":"x","tolerations":[{"key":"k"}],"resources":{"limits":{"cpu":"1"}}}}`},
	} {
		f.Add(seed.name, []byte(seed.spec))
	}
	fn := &Function{Log: logging.NewNopLogger()}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		var v structpb.Value
		if err := v.UnmarshalJSON(spec); err != nil {
			return // not JSON: Crossplane never sends that
		}
		xr, err := structpb.NewStruct(map[string]any{
			"apiVersion": "peerrelay.io/v1alpha1", "kind": "PeerRelay",
			"metadata": map[string]any{"name": name, "namespace": "ns"},
		})
		if err != nil {
			return // not valid UTF-8: no protobuf Struct can carry it
		}
		xr.Fields["spec"] = &v
		rsp, err := fn.RunFunction(context.Background(), &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}}})
		if err != nil {
			t.Fatalf("RunFunction returned an error: %v", err)
		}
		for _, r := range rsp.GetResults() {
			if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
				if len(rsp.GetDesired().GetResources()) != 0 {
					t.Fatalf("Fatal with composed resources: %v", rsp.GetDesired().GetResources())
				}
				return
			}
		}
		for key, r := range rsp.GetDesired().GetResources() {
			md := r.GetResource().GetFields()["metadata"].GetStructValue().GetFields()
			n := md["name"].GetStringValue()
			if len(n) > 63 || !dns1035.MatchString(n) {
				t.Fatalf("%s: name %q is not a DNS-1035 label of at most 63 characters (XR name %q)", key, n, name)
			}
			if md["namespace"].GetStringValue() != "ns" {
				t.Fatalf("%s: namespace %q", key, md["namespace"].GetStringValue())
			}
		}
	})
}
