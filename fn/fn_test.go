package fn

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
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

func TestCreationOrder(t *testing.T) {
	access := podAccess(t, nil)
	sts := &fnv1.Resource{Resource: mustStruct(t, "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: my-relay-0, namespace: team-a}")}
	cases := map[string]struct {
		reason   string
		observed map[string]*fnv1.Resource
		want     []string // the RoleBinding and StatefulSets composed
	}{
		"FirstReconcile": {
			reason: "Nothing exists yet: a RoleBinding to a Role that does not exist is refused, and so is a pod whose ServiceAccount does not.",
		},
		"RoleExists": {
			reason:   "The Role exists: the RoleBinding is composed; the StatefulSets wait for it, as containerboot could not write its state Secret.",
			observed: map[string]*fnv1.Resource{keyServiceAccount: access[keyServiceAccount], keyRole: access[keyRole]},
			want:     []string{keyRoleBinding},
		},
		"PodAccessExists": {
			reason:   "ServiceAccount, Role and RoleBinding exist: every replica's StatefulSet is composed.",
			observed: access,
			want:     []string{keyRoleBinding, "statefulset-0", "statefulset-1"},
		},
		"ExistingStayComposed": {
			reason:   "What exists stays composed while what it waited for is being recreated: dropping it would delete it, and a StatefulSet its running pod.",
			observed: map[string]*fnv1.Resource{keyRoleBinding: access[keyRoleBinding], "statefulset-0": sts},
			want:     []string{keyRoleBinding, "statefulset-0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2"), Resources: tc.observed}})
			var got []string
			for k := range rsp.GetDesired().GetResources() {
				if k == keyRoleBinding || strings.HasPrefix(k, keyPrefixStatefulSet) {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncomposed (-want +got):\n%s", tc.reason, diff)
			}
			for _, k := range []string{keyServiceAccount, keyRole, "service-0", "relayconfig-1"} {
				if rsp.GetDesired().GetResources()[k] == nil {
					t.Errorf("%s\n%s waits for nothing and must be composed", tc.reason, k)
				}
			}
		})
	}
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

func TestRunFunctionServiceAnnotations(t *testing.T) {
	cases := map[string]struct {
		reason   string
		spec     string
		input    string
		observed map[string]*fnv1.Resource
		replica  string
		want     map[string]string // subset expected
		absent   []string
	}{
		"CloudDefaults": {
			reason:  "Without elasticIPs a Service gets the public NLB defaults and cross-zone on.",
			spec:    "replicas: 1",
			replica: "service-0",
			want: map[string]string{
				"service.beta.kubernetes.io/aws-load-balancer-scheme":           "internet-facing",
				"service.beta.kubernetes.io/aws-load-balancer-attributes":       "load_balancing.cross_zone.enabled=true",
				"service.beta.kubernetes.io/azure-load-balancer-internal":       "false",
				"service.beta.kubernetes.io/aws-load-balancer-healthcheck-port": "9002",
			},
			absent: []string{annotationEIPAllocations},
		},
		"UserOverridesDefaultsAndKeepsAttributes": {
			reason: "The user's annotations beat the cloud defaults, and a user-set attributes key is not replaced.",
			spec: `replicas: 1
service:
  annotations:
    service.beta.kubernetes.io/aws-load-balancer-scheme: internal
    service.beta.kubernetes.io/aws-load-balancer-attributes: deletion_protection.enabled=true`,
			replica: "service-0",
			want: map[string]string{
				"service.beta.kubernetes.io/aws-load-balancer-scheme":     "internal",
				"service.beta.kubernetes.io/aws-load-balancer-attributes": "deletion_protection.enabled=true",
			},
		},
		"ElasticIPPerReplica": {
			reason: "Replica N is pinned to elasticIPs[N].",
			spec: `replicas: 2
aws:
  elasticIPs:
  - {allocationID: eipalloc-0aa, subnetID: subnet-0aa}
  - {allocationID: eipalloc-0bb, subnetID: subnet-0bb}`,
			observed: map[string]*fnv1.Resource{"relayconfig-1": checkedRelayConfig(t, "subnet-0bb", "eipalloc-0bb", "")},
			replica:  "service-1",
			want: map[string]string{
				annotationEIPAllocations: "eipalloc-0bb",
				annotationSubnets:        "subnet-0bb",
			},
		},
		"AzureOnly": {
			reason:  "Input cloud: azure leaves the AWS annotations out.",
			spec:    "replicas: 1",
			input:   "cloud: azure",
			replica: "service-0",
			want:    map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "false"},
			absent:  []string{"service.beta.kubernetes.io/aws-load-balancer-scheme", annotationLBAttributes},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, tc.spec), Resources: tc.observed}}
			if tc.input != "" {
				req.Input = mustStruct(t, "apiVersion: fn.peerrelay.io/v1alpha1\nkind: Input\n"+tc.input)
			}
			rsp := run(t, req)
			svc := rsp.GetDesired().GetResources()[tc.replica]
			if svc == nil {
				t.Fatalf("%s\n%s not composed; results: %v", tc.reason, tc.replica, rsp.GetResults())
			}
			got := map[string]string{}
			for k, v := range valueAt(t, svc.GetResource(), "metadata", "annotations").(map[string]any) {
				got[k] = v.(string)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s\nannotation %s: want %q, got %q", tc.reason, k, v, got[k])
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s\nannotation %s should be absent", tc.reason, k)
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
		condition string // PeerRelayReady reason, if any
	}{
		"ElasticIPsShort": {
			reason:    "Fewer Elastic IPs than replicas is refused, naming both fields.",
			spec:      "replicas: 3\naws:\n  elasticIPs:\n  - {allocationID: eipalloc-0aa, subnetID: subnet-0aa}",
			wantMsg:   []string{"spec.aws.elasticIPs: Invalid value: \"1 entries\": spec.replicas is 3: give one Elastic IP per replica"},
			condition: reasonAWSConfigInvalid,
		},
		"BadTag": {
			reason:    "A tag without the tag: prefix is refused.",
			spec:      "tags: [k8s]",
			wantMsg:   []string{"spec.tags[0]", "must match"},
			condition: reasonSpecInvalid,
		},
		"UnknownField": {
			reason:    "An unknown field is named.",
			spec:      "replica: 3",
			wantMsg:   []string{`unknown field "replica"`},
			condition: reasonSpecInvalid,
		},
		"WrongType": {
			reason:    "A wrong type names the field and the type wanted.",
			spec:      "replicas: three",
			wantMsg:   []string{"spec.replicas: want an integer"},
			condition: reasonSpecInvalid,
		},
		"HugeReplicas": {
			reason:    "Replicas past the cap are refused with the cap.",
			spec:      "replicas: 5000",
			wantMsg:   []string{"spec.replicas: Invalid value: 5000: must be between 0 and 100"},
			condition: reasonSpecInvalid,
		},
		"StaticEndpointHostname": {
			reason:    "A hostname is not a static endpoint.",
			spec:      "staticEndpoints: [relay.example.com:41641]",
			wantMsg:   []string{"spec.staticEndpoints[0]", "must be ip:port"},
			condition: reasonSpecInvalid,
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
				if len(rsp.GetConditions()) != 1 || rsp.GetConditions()[0].GetReason() != tc.condition {
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
