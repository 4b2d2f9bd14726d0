package fn

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestRunFunctionPodMonitor(t *testing.T) {
	crd := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: podmonitors.monitoring.coreos.com}
`)}}}
	proxyCRD := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: proxyclasses.tailscale.com}
`)}}}
	pc := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, `
apiVersion: tailscale.com/v1alpha1
kind: ProxyClass
metadata: {name: monitored, annotations: {peerrelay.io/namespaces: "*"}}
spec:
  metrics:
    enable: true
    serviceMonitor: {enable: true, labels: {release: kube-prometheus}}
`)}}}
	want := func(labels string) *structpb.Struct {
		return mustStruct(t, `
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: my-relay
  namespace: team-a
  labels: {`+labels+`app.kubernetes.io/name: peerrelay, app.kubernetes.io/instance: my-relay, app.kubernetes.io/managed-by: function-peerrelay}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: peerrelay, app.kubernetes.io/instance: my-relay}}
  podMetricsEndpoints: [{port: metrics, path: /metrics}]
  sampleLimit: 2000
`)
	}
	cases := map[string]struct {
		reason      string
		spec        string
		required    map[string]*fnv1.Resources
		wantCRDAsk  bool
		wantMonitor *structpb.Struct
		wantWarn    string
	}{
		"Off": {
			reason: "Metrics alone compose no PodMonitor and ask for no CRD.",
			spec:   "metrics: {enable: true}",
		},
		"NotLookedUpYet": {
			reason:     "Until Crossplane says whether the PodMonitor CRD exists, none is composed: a kind the API server does not serve would fail the composition.",
			spec:       "metrics: {enable: true, podMonitor: {enable: true}}",
			wantCRDAsk: true,
		},
		"NoCRD": {
			reason:     "Without the Prometheus Operator a warning says so, naming the port to scrape, and nothing fails.",
			spec:       "metrics: {enable: true, podMonitor: {enable: true}}",
			required:   map[string]*fnv1.Resources{requiredPodMonitorCRDKey: {}},
			wantCRDAsk: true,
			wantWarn:   `no PodMonitor is composed: the PodMonitor CRD (podmonitors.monitoring.coreos.com, from the Prometheus Operator) is not installed; scrape the relay pods' port named "metrics" yourself`,
		},
		"Composed": {
			reason:      "With the CRD, one PodMonitor selects the relay pods' metrics port, with the user's labels; ours win.",
			spec:        "metrics: {enable: true, podMonitor: {enable: true, labels: {release: prom, app.kubernetes.io/name: theirs}}}",
			required:    map[string]*fnv1.Resources{requiredPodMonitorCRDKey: crd},
			wantCRDAsk:  true,
			wantMonitor: want("release: prom, "),
		},
		"ProxyClassServiceMonitor": {
			reason:      "A ProxyClass's serviceMonitor, which the Tailscale operator ignores for PeerRelays, asks for the PodMonitor here.",
			spec:        "proxyClass: monitored",
			required:    map[string]*fnv1.Resources{requiredPodMonitorCRDKey: crd, requiredProxyClassCRDKey: proxyCRD, requiredProxyClassKey: pc},
			wantCRDAsk:  true,
			wantMonitor: want("release: kube-prometheus, "),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := "replicas: 1\n" + tc.spec
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, spec), Resources: podAccess(t, nil)}, RequiredResources: tc.required})
			sel, asked := rsp.GetRequirements().GetResources()[requiredPodMonitorCRDKey]
			if asked != tc.wantCRDAsk || (asked && sel.GetMatchName() != podMonitorCRDName) {
				t.Errorf("%s\nPodMonitor CRD required: %v (%v), want %v", tc.reason, asked, sel, tc.wantCRDAsk)
			}
			got := rsp.GetDesired().GetResources()[keyPodMonitor].GetResource()
			if diff := cmp.Diff(tc.wantMonitor, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nPodMonitor -want +got:\n%s", tc.reason, diff)
			}
			var warns []string
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_WARNING {
					warns = append(warns, r.GetMessage())
				}
			}
			if w := strings.Join(warns, "\n"); (tc.wantWarn == "" && w != "") || !strings.Contains(w, tc.wantWarn) {
				t.Errorf("%s\nwarnings: %q, want %q", tc.reason, w, tc.wantWarn)
			}
		})
	}
}
