package fn

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
)

func TestRunFunctionProxyClass(t *testing.T) {
	pc := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, `
apiVersion: tailscale.com/v1alpha1
kind: ProxyClass
metadata: {name: relays, annotations: {peerrelay.io/namespaces: "team-c, team-a"}}
spec:
  statefulSet:
    pod:
      labels: {team: net, app.kubernetes.io/name: not-ours}
      nodeSelector: {node-role: edge}
      priorityClassName: system-cluster-critical
      tailscaleContainer:
        image: registry.example/tailscale:v1.102.5
        resources: {requests: {cpu: 50m}}
`)}}}
	// The same ProxyClass, offered to another team only.
	teamB := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, `
apiVersion: tailscale.com/v1alpha1
kind: ProxyClass
metadata: {name: relays, annotations: {peerrelay.io/namespaces: team-b}}
spec:
  statefulSet:
    pod:
      priorityClassName: system-cluster-critical
      tailscaleContainer:
        image: registry.example/tailscale:v1.102.5
        env: [{name: TEAM_B_TOKEN, value: s3cret}]
`)}}}
	crd := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: mustStruct(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: proxyclasses.tailscale.com}
`)}}}
	cases := map[string]struct {
		reason    string
		spec      string
		required  map[string]*fnv1.Resources
		wantImage string
		wantNode  map[string]any
		wantLabel map[string]any
		wantWarn  string
		// wantProxyClassRequired: the ProxyClass itself is asked for (only
		// once its CRD is known to exist).
		wantProxyClassRequired bool
	}{
		"NotLookedUpYet": {
			reason:    "Before Crossplane supplies the ProxyClass CRD, the defaults apply and only the CRD is asked for.",
			spec:      "proxyClass: relays",
			wantImage: "tailscale/tailscale:v1.102.5",
		},
		"NoCRD": {
			reason:    "Without the Tailscale operator's ProxyClass CRD nothing fails: a warning says why the ProxyClass does not apply, and no ProxyClass is asked for (Crossplane would fail the composition on an unknown kind).",
			spec:      "proxyClass: relays",
			required:  map[string]*fnv1.Resources{requiredProxyClassCRDKey: {}},
			wantImage: "tailscale/tailscale:v1.102.5",
			wantWarn:  `the ProxyClass CRD (proxyclasses.tailscale.com, from the Tailscale operator) is not installed`,
		},
		"CRDNoProxyClassYet": {
			reason:                 "With the CRD known, the ProxyClass is asked for; until it comes, the defaults apply and nothing is warned of.",
			spec:                   "proxyClass: relays",
			required:               map[string]*fnv1.Resources{requiredProxyClassCRDKey: crd},
			wantImage:              "tailscale/tailscale:v1.102.5",
			wantProxyClassRequired: true,
		},
		"Applied": {
			reason:                 "The ProxyClass's pod settings reach the StatefulSet; our selector labels still win.",
			spec:                   "proxyClass: relays",
			required:               map[string]*fnv1.Resources{requiredProxyClassCRDKey: crd, requiredProxyClassKey: pc},
			wantProxyClassRequired: true,
			wantImage:              "registry.example/tailscale:v1.102.5",
			wantNode:               map[string]any{"node-role": "edge"},
			wantLabel:              map[string]any{"team": "net", "app.kubernetes.io/name": "peerrelay"},
		},
		"SpecPodWins": {
			reason:                 "spec.pod overrides the ProxyClass field by field.",
			spec:                   "proxyClass: relays\npod: {image: mirror.example/tailscale:v1.102.5, nodeSelector: {zone: a}}",
			required:               map[string]*fnv1.Resources{requiredProxyClassCRDKey: crd, requiredProxyClassKey: pc},
			wantProxyClassRequired: true,
			wantImage:              "mirror.example/tailscale:v1.102.5",
			wantNode:               map[string]any{"zone": "a"},
		},
		"NotOffered": {
			reason:                 "A ProxyClass not offered to the PeerRelay's namespace (its peerrelay.io/namespaces annotation) is not applied: its env and priority class would land in a StatefulSet this namespace reads.",
			spec:                   "proxyClass: relays",
			required:               map[string]*fnv1.Resources{requiredProxyClassCRDKey: crd, requiredProxyClassKey: teamB},
			wantProxyClassRequired: true,
			wantImage:              "tailscale/tailscale:v1.102.5",
			wantWarn:               `ProxyClass "relays" named by spec.proxyClass is not offered to namespace team-a`,
		},
		"Missing": {
			reason:                 "A ProxyClass that does not exist is a warning, not a failure.",
			spec:                   "proxyClass: nope",
			required:               map[string]*fnv1.Resources{requiredProxyClassCRDKey: crd, requiredProxyClassKey: {}},
			wantProxyClassRequired: true,
			wantImage:              "tailscale/tailscale:v1.102.5",
			wantWarn:               `ProxyClass "nope" named by spec.proxyClass does not exist`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, tc.spec), Resources: podAccess(t, nil)}, RequiredResources: tc.required})
			reqs := rsp.GetRequirements().GetResources()
			if sel := reqs[requiredProxyClassCRDKey]; sel.GetKind() != "CustomResourceDefinition" || sel.GetMatchName() != "proxyclasses.tailscale.com" {
				t.Errorf("%s\nwant a ProxyClass CRD requirement, got %v", tc.reason, sel)
			}
			sel, asked := reqs[requiredProxyClassKey]
			if asked != tc.wantProxyClassRequired {
				t.Errorf("%s\nProxyClass required: want %v, got %v", tc.reason, tc.wantProxyClassRequired, asked)
			}
			if asked && (sel.GetKind() != "ProxyClass" || sel.GetApiVersion() != "tailscale.com/v1alpha1" || !strings.HasPrefix(tc.spec, "proxyClass: "+sel.GetMatchName())) {
				t.Errorf("%s\nwant a ProxyClass requirement, got %v", tc.reason, sel)
			}
			sts := rsp.GetDesired().GetResources()["statefulset-0"].GetResource()
			pod := valueAt(t, sts, "spec", "template", "spec").(map[string]any)
			if img := pod["containers"].([]any)[0].(map[string]any)["image"]; img != tc.wantImage {
				t.Errorf("%s\nimage: want %s, got %v", tc.reason, tc.wantImage, img)
			}
			if tc.wantNode != nil {
				if diff := cmp.Diff(tc.wantNode, pod["nodeSelector"]); diff != "" {
					t.Errorf("%s\nnodeSelector -want +got:\n%s", tc.reason, diff)
				}
			}
			labels, _ := valueAt(t, sts, "spec", "template", "metadata", "labels").(map[string]any)
			for k, v := range tc.wantLabel {
				if labels[k] != v {
					t.Errorf("%s\nlabel %s: want %v, got %v", tc.reason, k, v, labels[k])
				}
			}
			if strings.Contains(sts.String(), "s3cret") || strings.Contains(sts.String(), "system-cluster-critical") && tc.wantWarn != "" {
				t.Errorf("%s\nthe StatefulSet carries what a ProxyClass not offered to it holds", tc.reason)
			}
			var warn string
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_WARNING {
					warn = r.GetMessage()
				}
			}
			if !strings.Contains(warn, tc.wantWarn) || (tc.wantWarn == "" && warn != "") {
				t.Errorf("%s\nwarning: want %q, got %q", tc.reason, tc.wantWarn, warn)
			}
		})
	}
}
