package fn

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		req := func() *fnv1.RunFunctionRequest {
			return &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: proto.Clone(xr).(*structpb.Struct)}}}
		}
		rsp, err := fn.RunFunction(context.Background(), req())
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

// FuzzAWSPlacement feeds random observed state (as JSON: composition key to
// object) to a PeerRelay with every AWS mode on: whatever Crossplane and
// the providers report, RunFunction must not panic, must never pin a
// Service or load balancer to a placement the provider did not check, and
// must compose each AWS object with a region.
func FuzzAWSPlacement(f *testing.F) {
	const spec = `{"replicas":2,"aws":{"region":"eu-west-1","loadBalancer":"Managed","zonePlacement":"PerReplica","elasticIPs":[{"subnetID":"subnet-0a","allocate":true},{"subnetID":"subnet-0b","allocationID":"eipalloc-0b"}]}}`
	for _, seed := range []string{
		`{}`,
		`{"eip-0":{"status":{"atProvider":{"allocationId":"eipalloc-0a"}}},"relayconfig-0":{"status":{"atProvider":{"aws":{"checked":true,"subnetID":"subnet-0a","allocationID":"eipalloc-0a","zone":"eu-west-1a","vpcID":"vpc-0a"}}}}}`,
		`{"relayconfig-1":{"status":{"atProvider":{"aws":{"checked":true,"subnetID":"subnet-0b","allocationID":"eipalloc-0b","problems":["bad"]}}}},"lb-1":{"spec":{"forProvider":{"subnetMapping":[{"subnetId":"subnet-0c","allocationId":"eipalloc-0c"}]}}}}`,
		`{"relayconfig-0":{"status":{"conditions":[{"type":"Ready","status":"True"}],"atProvider":{"endpoints":["198.51.100.1:41641"]}}},"service-1":{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.1"}]}}}}`,
		`{"service-7":{"metadata":{"annotations":{"x":1}}},"lb-0":{"spec":{"forProvider":{"subnetMapping":"no"}}},"eip-99999999999999999999":{}}`,
	} {
		f.Add(seed)
	}
	fn := &Function{Log: logging.NewNopLogger()}
	f.Fuzz(func(t *testing.T, observed string) {
		var obs map[string]any
		if json.Unmarshal([]byte(observed), &obs) != nil {
			return
		}
		req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, spec), Resources: map[string]*fnv1.Resource{}}}
		checked := map[string]bool{}
		for key, o := range obs {
			m, ok := o.(map[string]any)
			if !ok {
				continue
			}
			s, err := structpb.NewStruct(m)
			if err != nil {
				return
			}
			req.Observed.Resources[key] = &fnv1.Resource{Resource: s}
			if c := atProvider(&composed.Unstructured{Unstructured: unstructured.Unstructured{Object: m}}).AWS; c != nil && len(c.Problems) == 0 {
				checked[c.SubnetID+"/"+c.AllocationID] = true
			}
		}
		rsp, err := fn.RunFunction(context.Background(), req)
		if err != nil {
			t.Fatalf("RunFunction returned an error: %v", err)
		}
		placement := func(s *structpb.Struct) string {
			p := fieldpath.Pave(s.AsMap())
			sub, _ := p.GetString("spec.forProvider.subnetMapping[0].subnetId")
			alloc, _ := p.GetString("spec.forProvider.subnetMapping[0].allocationId")
			return sub + "/" + alloc
		}
		for key, r := range rsp.GetDesired().GetResources() {
			obj := fieldpath.Pave(r.GetResource().AsMap())
			if i, ok := replicaIndex(key, keyPrefixLoadBalancer); ok {
				placed := placement(r.GetResource())
				applied := "/"
				if was, ok := req.Observed.Resources[key]; ok {
					applied = placement(was.GetResource())
				}
				if !checked[placed] && placed != applied {
					t.Fatalf("lb-%d placed with %s, which no provider check passed", i, placed)
				}
			}
			apiVersion, _ := obj.GetString("apiVersion")
			region, _ := obj.GetString("spec.forProvider.region")
			if strings.Contains(apiVersion, "upbound.io") && region != "eu-west-1" {
				t.Fatalf("%s has no region", key)
			}
		}
	})
}
