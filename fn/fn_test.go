package fn

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// mustStruct turns YAML into a protobuf Struct.
func mustStruct(t testing.TB, y string) *structpb.Struct {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return resource.MustStructJSON(string(j))
}

func xr(t testing.TB, spec string) *fnv1.Resource {
	t.Helper()
	return &fnv1.Resource{Resource: mustStruct(t, `
apiVersion: peerrelay.io/v1alpha1
kind: PeerRelay
metadata: {name: my-relay, namespace: team-a}
spec:
`+indent(spec))}
}

func indent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n")
}

func run(t testing.TB, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	t.Helper()
	f := &Function{Log: logging.NewNopLogger()}
	rsp, err := f.RunFunction(context.Background(), req)
	if err != nil {
		t.Fatalf("RunFunction returned an error: %v", err)
	}
	return rsp
}

// podAccess is what a PeerRelay's first reconcile leaves behind, with
// more: the ServiceAccount, Role and RoleBinding its pods run as, which the
// StatefulSets wait for (relay.composable).
func podAccess(t testing.TB, more map[string]*fnv1.Resource) map[string]*fnv1.Resource {
	t.Helper()
	out := map[string]*fnv1.Resource{
		keyServiceAccount: {Resource: mustStruct(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: my-relay, namespace: team-a}")},
		keyRole:           {Resource: mustStruct(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: my-relay, namespace: team-a}")},
		keyRoleBinding:    {Resource: mustStruct(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: my-relay, namespace: team-a}")},
	}
	maps.Copy(out, more)
	return out
}

func valueAt(t testing.TB, s *structpb.Struct, path ...string) any {
	t.Helper()
	var v any = s.AsMap()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func TestRunFunctionComposes(t *testing.T) {
	type want struct {
		names       map[string]string // pipeline key -> metadata.name
		namespace   string
		notComposed []string
	}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   want
	}{
		"ThreeReplicas": {
			reason: "A v2 PeerRelay with three replicas composes the shared objects once and three of each per-replica object, named after the PeerRelay.",
			req:    &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 3\nauthKeySecretRef: {name: ts-auth}"), Resources: podAccess(t, nil)}},
			want: want{
				names: map[string]string{
					"serviceaccount": "my-relay", "role": "my-relay", "rolebinding": "my-relay",
					"statefulset-0": "my-relay-0", "statefulset-2": "my-relay-2", "service-0": "my-relay-0", "service-2": "my-relay-2", "relayconfig-2": "my-relay-2",
				},
				namespace:   "team-a",
				notComposed: []string{"service-3", "relayconfig-3", "statefulset-3", "statefulset"},
			},
		},
		"LegacyClaim": {
			reason: "A legacy XPeerRelay composes into its claim's namespace under its claim's name.",
			req: &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, `
apiVersion: legacy.peerrelay.io/v1alpha1
kind: XPeerRelay
metadata:
  name: my-relay-x7k2p
  labels: {crossplane.io/claim-name: my-relay, crossplane.io/claim-namespace: team-b}
spec:
  replicas: 1
  compositionRef: {name: xpeerrelays.legacy.peerrelay.io}
  claimRef: {apiVersion: legacy.peerrelay.io/v1alpha1, kind: PeerRelay, name: my-relay, namespace: team-b}
`)}, Resources: podAccess(t, nil)}},
			want: want{names: map[string]string{"statefulset-0": "my-relay-0", "service-0": "my-relay-0"}, namespace: "team-b", notComposed: []string{"service-1"}},
		},
		"ZeroReplicas": {
			reason: "replicas: 0 keeps the shared objects and composes no replica.",
			req:    &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 0")}},
			want:   want{names: map[string]string{"role": "my-relay"}, namespace: "team-a", notComposed: []string{"service-0", "relayconfig-0", "statefulset-0"}},
		},
		"LongName": {
			reason: "A name too long for derived names is shortened with a hash suffix, within 49 characters.",
			req: &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, `
apiVersion: peerrelay.io/v1alpha1
kind: PeerRelay
metadata: {name: a-very-long-peer-relay-name-that-goes-on-and-on-and-on-forever, namespace: team-a}
spec: {}
`)}, Resources: podAccess(t, nil)}},
			want: want{names: map[string]string{
				"role":          "a-very-long-peer-relay-name-that-goes-on-4d89b579",
				"statefulset-0": "a-very-long-peer-relay-name-that-goes-on-4d89b579-0",
			}, namespace: "team-a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, tc.req)
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					t.Fatalf("%s\nunexpected Fatal: %s", tc.reason, r.GetMessage())
				}
			}
			res := rsp.GetDesired().GetResources()
			for key, wantName := range tc.want.names {
				got := res[key]
				if got == nil {
					t.Errorf("%s\n%s was not composed", tc.reason, key)
					continue
				}
				if n := valueAt(t, got.GetResource(), "metadata", "name"); n != wantName {
					t.Errorf("%s\n%s: want name %q, got %v", tc.reason, key, wantName, n)
				}
				if ns := valueAt(t, got.GetResource(), "metadata", "namespace"); ns != tc.want.namespace {
					t.Errorf("%s\n%s: want namespace %q, got %v", tc.reason, key, tc.want.namespace, ns)
				}
			}
			for _, key := range tc.want.notComposed {
				if _, ok := res[key]; ok {
					t.Errorf("%s\n%s should not be composed", tc.reason, key)
				}
			}
		})
	}
}

func TestRunFunctionBadInput(t *testing.T) {
	earlier := &fnv1.State{Resources: map[string]*fnv1.Resource{
		"from-earlier-step": {Resource: mustStruct(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}")},
	}}
	cases := map[string]struct {
		reason    string
		spec      string
		xr        *fnv1.Resource
		wantMsg   []string
		condition xpv2.ConditionReason // PeerRelayReady reason, if any
	}{
		"ElasticIPsShort": {
			reason:    "Fewer Elastic IPs than replicas is refused, naming both fields.",
			spec:      "replicas: 3\naws:\n  elasticIPs:\n  - {allocationID: eipalloc-0aa, subnetID: subnet-0aa}",
			wantMsg:   []string{"spec.aws.elasticIPs: Invalid value: \"1 entries\": spec.replicas is 3: give one Elastic IP per replica"},
			condition: v1alpha1.ReasonAWSConfigInvalid,
		},
		"BadTag": {
			reason:    "A tag without the tag: prefix is refused.",
			spec:      "tags: [k8s]",
			wantMsg:   []string{"spec.tags[0]", "must match"},
			condition: v1alpha1.ReasonSpecInvalid,
		},
		"UnknownField": {
			reason:    "An unknown field is named.",
			spec:      "replica: 3",
			wantMsg:   []string{`unknown field "replica"`},
			condition: v1alpha1.ReasonSpecInvalid,
		},
		"WrongType": {
			reason:    "A wrong type names the field and the type wanted.",
			spec:      "replicas: three",
			wantMsg:   []string{"spec.replicas: want an integer"},
			condition: v1alpha1.ReasonSpecInvalid,
		},
		"HugeReplicas": {
			reason:    "Replicas past the cap are refused with the cap.",
			spec:      "replicas: 5000",
			wantMsg:   []string{"spec.replicas: Invalid value: 5000: must be between 0 and 100"},
			condition: v1alpha1.ReasonSpecInvalid,
		},
		"StaticEndpointHostname": {
			reason:    "A hostname is not a static endpoint.",
			spec:      "staticEndpoints: [relay.example.com:41641]",
			wantMsg:   []string{"spec.staticEndpoints[0]", "must be ip:port"},
			condition: v1alpha1.ReasonSpecInvalid,
		},
		"ClusterXRWithoutClaim": {
			reason: "A cluster XPeerRelay with no claim has no namespace to compose into.",
			xr: &fnv1.Resource{Resource: mustStruct(t, `
apiVersion: legacy.peerrelay.io/v1alpha1
kind: XPeerRelay
metadata: {name: orphan}
spec: {}`)},
			wantMsg: []string{"needs a claim"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := tc.xr
			if x == nil {
				x = xr(t, tc.spec)
			}
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: x}, Desired: earlier})
			var fatal *fnv1.Result
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					fatal = r
				}
			}
			if fatal == nil {
				t.Fatalf("%s\nwant a Fatal result, got %v", tc.reason, rsp.GetResults())
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(fatal.GetMessage(), m) {
					t.Errorf("%s\nFatal message %q lacks %q", tc.reason, fatal.GetMessage(), m)
				}
			}
			// Nothing half-applied: the desired state is exactly what the
			// earlier step left.
			if diff := cmp.Diff(earlier, rsp.GetDesired(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\ndesired state changed: -want +got:\n%s", tc.reason, diff)
			}
			if tc.condition != "" {
				if len(rsp.GetConditions()) != 1 || rsp.GetConditions()[0].GetReason() != string(tc.condition) {
					t.Errorf("%s\nwant PeerRelayReady reason %s, got %v", tc.reason, tc.condition, rsp.GetConditions())
				}
			}
		})
	}
}

// TestStateSecretsSurviveSpecChanges: a replica's state Secret (its device
// identity) is the provider's, named by its RelayConfig, and not composed:
// containerboot writes it often, and each write to a composed resource
// would be a watch event on the PeerRelay. Its name stays through any spec
// change while the replica exists.
func TestStateSecretsSurviveSpecChanges(t *testing.T) {
	for name, spec := range map[string]string{
		"port": "replicas: 3\nport: 7000",
		"tags": "replicas: 3\ntags: [tag:other]",
		"pod":  "replicas: 3\npod: {image: example/tailscale:v1.102.5}",
	} {
		rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, spec)}})
		for key, r := range rsp.GetDesired().GetResources() {
			if r.GetResource().GetFields()["kind"].GetStringValue() == "Secret" {
				t.Errorf("%s: %s is a composed Secret", name, key)
			}
		}
		for i := range 3 {
			rc := rsp.GetDesired().GetResources()[relayConfigKey(i)].GetResource()
			if got, want := valueAt(t, rc, "spec", "forProvider", "stateSecretName"), "my-relay-"+strconv.Itoa(i); got != want {
				t.Errorf("%s: relayconfig-%d names state Secret %q, want %q", name, i, got, want)
			}
		}
	}
}

// testRelay is PeerRelay team-a/my-relay with every default applied, then
// mutate.
func testRelay(t *testing.T, mutate ...func(*relay)) *relay {
	t.Helper()
	r, err := defaults(inputs{Name: "my-relay", Namespace: "team-a"}, v1alpha1.PeerRelaySpec{
		Replicas:         ptr.To[int32](2),
		AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "ts-auth"},
	}, &fnv1alpha1.Input{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

var labels1 = map[string]string{
	labelName: appName, labelInstance: "my-relay", labelManagedBy: "function-peerrelay", labelReplica: "1",
}

func TestWarnings(t *testing.T) {
	cases := map[string]struct {
		reason string
		r      *relay
		want   []string
	}{
		"None": {reason: "A plain PeerRelay has nothing to warn of.", r: testRelay(t, func(r *relay) { r.Spec.AuthKeySecretRef = nil; r.AuthKey = nil })},
		"AnnotationIgnored": {
			reason: "A Service annotation Elastic IP pinning overrides is ignored, as the Tailscale operator ignores it, with a warning naming it.",
			r: testRelay(t, func(r *relay) {
				r.Spec.AWS = &v1alpha1.AWSSpec{ElasticIPs: []v1alpha1.ElasticIP{{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a"}}}
				r.Spec.Service = &v1alpha1.ServiceSpec{Annotations: map[string]string{annotationEIPAllocations: "eipalloc-0ff", "x": "y"}}
			}),
			want: []string{"spec.service.annotations[" + annotationEIPAllocations + "] is ignored: spec.aws pins each replica's Service to its own subnet and Elastic IP"},
		},
		"TagsWithKey": {
			reason: "spec.tags beside a supplied key is ignored: the key's tags win.",
			r:      testRelay(t, func(r *relay) { r.Spec.Tags = []v1alpha1.Tag{"tag:relay"} }),
			want:   []string{"spec.tags is ignored while spec.authKeySecretRef is set: the devices get the tags of the key in Secret ts-auth"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, warnings(tc.r), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nwarnings (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
