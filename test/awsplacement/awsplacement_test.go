// Package awsplacement runs a Managed, per-replica-zone PeerRelay through
// function-peerrelay and provider-peerrelay against moto: Elastic IPs
// allocated, placements checked, load balancers created in two zones, and
// each replica advertising its own Elastic IP.
//
// Crossplane and Upbound's provider-aws cannot run here, so the test plays
// them, and nothing more: it calls the function with the observed state,
// applies the RelayConfigs the function composes to the API server, and
// does what provider-aws would do for each composed EIP and LB with the
// real AWS API calls (AllocateAddress, CreateLoadBalancer) against moto,
// tagging each with the tags composed for it, as provider-aws does: the
// provider uses an Elastic IP or a load balancer only when its tags say it
// is the RelayConfig's namespace's.
// The function, the provider, the API server and the AWS API are real.
package awsplacement

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
	"tailscale.com/ipn"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/fn"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness/cloud"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// world is the test's stand-in for Crossplane and provider-aws.
type world struct {
	t        *testing.T
	env      *providertest.Env
	moto     *cloud.Moto
	xr       *structpb.Struct
	observed map[string]*fnv1.Resource
	// allocations the test made for each composed EIP, by key; the load
	// balancers it created, by key.
	allocations map[string]string
	lbs         map[string]bool
}

// reconcile is one Crossplane reconcile of the PeerRelay: call the function
// with what is observed, then make what it desires exist.
func (w *world) reconcile() map[string]*fnv1.Resource {
	w.t.Helper()
	ctx := context.Background()
	for key := range w.observed {
		if strings.HasPrefix(key, "relayconfig-") {
			w.observeRelayConfig(key)
		}
	}
	f := &fn.Function{Log: logging.NewNopLogger()}
	rsp, err := f.RunFunction(ctx, &fnv1.RunFunctionRequest{Observed: &fnv1.State{
		Composite: &fnv1.Resource{Resource: w.xr}, Resources: w.observed,
	}})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			w.t.Fatalf("the function failed: %s", r.GetMessage())
		}
	}
	desired := rsp.GetDesired().GetResources()
	for key, d := range desired {
		obj := d.GetResource().AsMap()
		switch obj["kind"] {
		case "RelayConfig":
			u := &unstructured.Unstructured{Object: obj}
			if err := w.env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership, client.FieldOwner("crossplane")); err != nil {
				w.t.Fatalf("applying %s: %v", key, err)
			}
			w.observeRelayConfig(key)
		case "EIP":
			w.provideEIP(key, obj)
		case "LB":
			w.provideLB(key, obj)
		default:
			// Applied as desired: what the next reconcile observes (the
			// StatefulSets wait for the ServiceAccount, Role and RoleBinding).
			w.observe(key, obj)
		}
	}
	return desired
}

// provideEIP allocates the Elastic IP a composed EIP stands for, with its
// tags, once.
func (w *world) provideEIP(key string, obj map[string]any) {
	w.t.Helper()
	fp := obj["spec"].(map[string]any)["forProvider"].(map[string]any)
	if fp["domain"] != "vpc" {
		w.t.Fatalf("%s: want domain vpc, got %v", key, fp["domain"])
	}
	if _, ok := w.allocations[key]; !ok {
		w.allocations[key] = w.moto.AllocateAddress(w.t, w.tags(key, fp))
	}
	obj["status"] = map[string]any{"atProvider": map[string]any{"allocationId": w.allocations[key]}}
	w.observe(key, obj)
}

// provideLB creates the network load balancer a composed LB stands for,
// with the name and subnet mapping the function chose, once.
func (w *world) provideLB(key string, obj map[string]any) {
	w.t.Helper()
	fp := obj["spec"].(map[string]any)["forProvider"].(map[string]any)
	if !w.lbs[key] {
		m := fp["subnetMapping"].([]any)[0].(map[string]any)
		w.moto.CreatePlacedNLB(w.t, fp["name"].(string), m["subnetId"].(string), m["allocationId"].(string), w.tags(key, fp))
		w.lbs[key] = true
	}
	w.observe(key, obj)
}

// tags are a composed resource's spec.forProvider.tags, which provider-aws
// puts on what it creates.
func (w *world) tags(key string, forProvider map[string]any) map[string]string {
	w.t.Helper()
	composed, _ := forProvider["tags"].(map[string]any)
	if len(composed) == 0 {
		w.t.Fatalf("%s: no tags composed", key)
	}
	tags := map[string]string{}
	for k, v := range composed {
		tags[k] = fmt.Sprint(v)
	}
	return tags
}

func (w *world) observe(key string, obj map[string]any) {
	w.t.Helper()
	s, err := structpb.NewStruct(obj)
	if err != nil {
		w.t.Fatal(err)
	}
	w.observed[key] = &fnv1.Resource{Resource: s}
}

// observeRelayConfig reads a RelayConfig back from the API server, status
// and all, as Crossplane observes it.
func (w *world) observeRelayConfig(key string) {
	w.t.Helper()
	name := fmt.Sprintf("edge-relay-%s", strings.TrimPrefix(key, "relayconfig-"))
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind(v1alpha1.RelayConfigKind)
	if err := w.env.Client.Get(context.Background(), client.ObjectKey{Namespace: w.env.NS, Name: name}, u); err != nil {
		w.t.Fatalf("reading %s: %v", name, err)
	}
	w.observe(key, u.Object)
}

// TestManagedRelaysInTwoZones: two replicas, each with a new Elastic IP,
// each in its own zone behind its own NLB, each advertising its own
// Elastic IP's address.
func TestManagedRelaysInTwoZones(t *testing.T) {
	m := cloud.StartMoto(t)
	env := providertest.Start(t, providertest.Options{Poll: time.Second, ProviderConfig: v1alpha1.ProviderConfigSpec{
		AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsSecret, SecretRef: &v1alpha1.SecretRef{Name: "aws", Namespace: "team-a"}, Region: "us-east-1", Endpoint: m.Endpoint},
	}})
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: env.NS, Name: "aws"},
		Data: map[string][]byte{"aws_access_key_id": []byte("testing"), "aws_secret_access_key": []byte("testing")}}); err != nil {
		t.Fatal(err)
	}
	n := m.CreateAWSNetwork(t, env.NS)
	xr := map[string]any{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: peerrelay.io/v1alpha1
kind: PeerRelay
metadata: {name: edge-relay, namespace: %s}
spec:
  replicas: 2
  authKeySecretRef: {name: tailscale-auth}
  aws:
    region: us-east-1
    loadBalancer: Managed
    zonePlacement: PerReplica
    elasticIPs:
    - {subnetID: %s, allocate: true}
    - {subnetID: %s, allocate: true}
`, env.NS, n.PublicSubnet, n.MappedSubnet)), &xr); err != nil {
		t.Fatal(err)
	}
	s, err := structpb.NewStruct(xr)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, env: env, moto: m, xr: s, observed: map[string]*fnv1.Resource{}, allocations: map[string]string{}, lbs: map[string]bool{}}

	// Reconcile until both replicas advertise an endpoint, as Crossplane
	// would on its poll and on composed resources' changes.
	var desired map[string]*fnv1.Resource
	deadline := time.Now().Add(60 * time.Second)
	for {
		desired = w.reconcile()
		if advertised(t, env, 0) != "" && advertised(t, env, 1) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas never advertised their Elastic IPs; desired: %v", keys(desired))
		}
		time.Sleep(200 * time.Millisecond)
	}
	desired = w.reconcile()

	zones := map[int]string{0: "us-east-1a", 1: "us-east-1b"}
	seen := map[string]int{}
	for i := range 2 {
		want := m.PublicIP(t, w.allocations[fmt.Sprintf("eip-%d", i)]) + ":41641"
		if got := advertised(t, env, i); got != want {
			t.Errorf("replica %d advertises %s, want its own Elastic IP %s", i, got, want)
		}
		if j, dup := seen[want]; dup {
			t.Errorf("replicas %d and %d advertise the same endpoint %s", j, i, want)
		}
		seen[want] = i
		sts := desired[fmt.Sprintf("statefulset-%d", i)]
		if sts == nil {
			t.Fatalf("replica %d has no StatefulSet; desired: %v", i, keys(desired))
		}
		if got := zoneOf(sts.GetResource().AsMap()); got != zones[i] {
			t.Errorf("replica %d runs in zone %q, want %q (its subnet's)", i, got, zones[i])
		}
		for _, k := range []string{"lb-%d", "targetgroup-%d", "listener-%d"} {
			if desired[fmt.Sprintf(k, i)] == nil {
				t.Errorf("replica %d: %s not composed", i, fmt.Sprintf(k, i))
			}
		}
		tg := desired[fmt.Sprintf("targetgroup-%d", i)]
		if tg != nil && tg.GetResource().AsMap()["spec"].(map[string]any)["forProvider"].(map[string]any)["vpcId"] != n.VPCID {
			t.Errorf("replica %d's target group is not in the subnets' VPC %s", i, n.VPCID)
		}
	}
}

// advertised is the endpoint replica i's config Secret advertises, or "".
func advertised(t *testing.T, env *providertest.Env, i int) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: env.NS, Name: fmt.Sprintf("edge-relay-%d-config", i)}, s); err != nil {
		return ""
	}
	var c ipn.ConfigVAlpha
	if err := json.Unmarshal(s.Data[tsconfig.FileName], &c); err != nil || len(c.RelayServerStaticEndpoints) != 1 {
		return ""
	}
	return c.RelayServerStaticEndpoints[0].String()
}

func zoneOf(sts map[string]any) string {
	terms := sts["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["affinity"].(map[string]any)["nodeAffinity"].(map[string]any)["requiredDuringSchedulingIgnoredDuringExecution"].(map[string]any)["nodeSelectorTerms"].([]any)
	for _, e := range terms[0].(map[string]any)["matchExpressions"].([]any) {
		if e.(map[string]any)["key"] == corev1.LabelTopologyZone {
			return e.(map[string]any)["values"].([]any)[0].(string)
		}
	}
	return ""
}

func keys(m map[string]*fnv1.Resource) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
