package fn

import (
	"fmt"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	xpresource "github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

func observedRes(t *testing.T, y string) *fnv1.Resource {
	t.Helper()
	return &fnv1.Resource{Resource: mustStruct(t, y)}
}

// svcWithIP is an observed Service with a load balancer address.
func svcWithIP(ip string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nstatus:\n  loadBalancer:\n    ingress: [{ip: " + ip + "}]"
}

// relayCfg is an observed RelayConfig, Ready or not, advertising eps.
func relayCfg(ready string, eps ...string) string {
	y := "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  conditions: [{type: Ready, status: \"" + ready + "\", reason: Available, lastTransitionTime: \"2026-01-01T00:00:00Z\"}]\n  atProvider:\n    endpoints: ["
	for i, e := range eps {
		if i > 0 {
			y += ", "
		}
		y += `"` + e + `"`
	}
	return y + "]"
}

// sts is an observed StatefulSet with ready pods.
func sts(ready int) string {
	return "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: my-relay-x}\nstatus: {readyReplicas: " + string(rune('0'+ready)) + "}"
}

func TestRunFunctionStatus(t *testing.T) {
	type want struct {
		condition *fnv1.Condition
		endpoints []any
		addresses string
		// readyReplicas is the REPLICAS column; waits each replica's
		// status.replicas[].reason ("" for a ready one).
		readyReplicas string
		waits         []string
	}
	cases := map[string]struct {
		reason   string
		observed map[string]string
		want     want
	}{
		"NothingObserved": {
			reason:   "A new PeerRelay waits for endpoints, and nothing is ready (its StatefulSets wait for the ServiceAccount).",
			observed: map[string]string{},
			want: want{
				condition:     &fnv1.Condition{Type: string(v1alpha1.ConditionPeerRelayReady), Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: string(v1alpha1.ReasonEndpointsPending), Message: ptr.To("0 of 2 replicas advertise a public address"), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()},
				endpoints:     []any{},
				readyReplicas: "0/2",
				waits:         []string{"waiting for its load balancer's address", "waiting for its load balancer's address"},
			},
		},
		"OneOfTwo": {
			reason: "One Service has an ingress IP, advertised in replica 0's config: one of two replicas has an address, shown from the ingress.",
			observed: map[string]string{
				"service-0": svcWithIP("203.0.113.10"), "service-1": "apiVersion: v1\nkind: Service\nmetadata: {name: y}",
				"relayconfig-0": relayCfg("True"),
				"statefulset-0": sts(1), "statefulset-1": sts(1), "serviceaccount": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: my-relay}",
			},
			want: want{
				condition:     &fnv1.Condition{Type: string(v1alpha1.ConditionPeerRelayReady), Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: string(v1alpha1.ReasonEndpointsPending), Message: ptr.To("1 of 2 replicas advertise a public address"), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()},
				endpoints:     []any{map[string]any{"replica": float64(0), "address": "203.0.113.10", "port": float64(41641)}},
				addresses:     "203.0.113.10",
				readyReplicas: "1/2",
				waits:         []string{"", "waiting for its load balancer's address"},
			},
		},
		"PodsPending": {
			reason: "Both replicas have addresses from the provider but one pod is not ready.",
			observed: map[string]string{
				"service-0": svcWithIP("203.0.113.10"), "service-1": svcWithIP("203.0.113.11"),
				"relayconfig-0": relayCfg("True", "198.51.100.1:41641", "198.51.100.2:41641"), "relayconfig-1": relayCfg("True", "203.0.113.11:41641"),
				"statefulset-0": sts(1), "statefulset-1": sts(0),
			},
			want: want{
				condition: &fnv1.Condition{Type: string(v1alpha1.ConditionPeerRelayReady), Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: string(v1alpha1.ReasonPodsPending), Message: ptr.To("1 of 2 relay pods are ready"), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()},
				endpoints: []any{
					map[string]any{"replica": float64(0), "address": "198.51.100.1", "port": float64(41641)},
					map[string]any{"replica": float64(0), "address": "198.51.100.2", "port": float64(41641)},
					map[string]any{"replica": float64(1), "address": "203.0.113.11", "port": float64(41641)},
				},
				addresses:     "198.51.100.1 198.51.100.2 203.0.113.11",
				readyReplicas: "1/2",
				waits:         []string{"", "waiting for its pod to be ready"},
			},
		},
		"Ready": {
			reason: "Every replica has an endpoint and every pod is ready.",
			observed: map[string]string{
				"service-0": svcWithIP("203.0.113.10"), "service-1": svcWithIP("203.0.113.11"),
				"relayconfig-0": relayCfg("True", "203.0.113.10:41641"), "relayconfig-1": relayCfg("True", "203.0.113.11:41641"),
				"statefulset-0": sts(1), "statefulset-1": sts(1),
			},
			want: want{
				condition: &fnv1.Condition{Type: string(v1alpha1.ConditionPeerRelayReady), Status: fnv1.Status_STATUS_CONDITION_TRUE, Reason: string(v1alpha1.ReasonReady), Message: ptr.To("all 2 replicas are advertising their public endpoints"), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()},
				endpoints: []any{
					map[string]any{"replica": float64(0), "address": "203.0.113.10", "port": float64(41641)},
					map[string]any{"replica": float64(1), "address": "203.0.113.11", "port": float64(41641)},
				},
				addresses:     "203.0.113.10 203.0.113.11",
				readyReplicas: "2/2",
				waits:         []string{"", ""},
			},
		},
		"ConfigPending": {
			reason: "Both load balancers have addresses and both pods are ready, but replica 1's config does not advertise its address yet: not ready.",
			observed: map[string]string{
				"service-0": svcWithIP("203.0.113.10"), "service-1": svcWithIP("203.0.113.11"),
				"relayconfig-0": relayCfg("True", "203.0.113.10:41641"), "relayconfig-1": relayCfg("False"),
				"statefulset-0": sts(1), "statefulset-1": sts(1),
			},
			want: want{
				condition: &fnv1.Condition{Type: string(v1alpha1.ConditionPeerRelayReady), Status: fnv1.Status_STATUS_CONDITION_FALSE, Reason: string(v1alpha1.ReasonEndpointsPending), Message: ptr.To("1 of 2 replicas advertise a public address"), Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()},
				endpoints: []any{
					map[string]any{"replica": float64(0), "address": "203.0.113.10", "port": float64(41641)},
					map[string]any{"replica": float64(1), "address": "203.0.113.11", "port": float64(41641)},
				},
				addresses:     "203.0.113.10 203.0.113.11",
				readyReplicas: "1/2",
				waits:         []string{"", "waiting for its config to advertise its address"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := map[string]*fnv1.Resource{}
			for k, y := range tc.observed {
				obs[k] = observedRes(t, y)
			}
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "replicas: 2"), Resources: obs}})
			if diff := cmp.Diff([]*fnv1.Condition{tc.want.condition}, rsp.GetConditions(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nconditions: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.endpoints, valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "endpoints")); diff != "" {
				t.Errorf("%s\nstatus.endpoints: -want +got:\n%s", tc.reason, diff)
			}
			if got := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "addresses"); got != tc.want.addresses {
				t.Errorf("%s\nstatus.addresses (the ENDPOINTS column): want %q, got %q", tc.reason, tc.want.addresses, got)
			}
			if got := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "readyReplicas"); got != tc.want.readyReplicas {
				t.Errorf("%s\nstatus.readyReplicas (the REPLICAS column): want %q, got %q", tc.reason, tc.want.readyReplicas, got)
			}
			replicas, _ := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "replicas").([]any)
			var waits []string
			for _, r := range replicas {
				w, _ := r.(map[string]any)["reason"].(string)
				waits = append(waits, w)
			}
			if diff := cmp.Diff(tc.want.waits, waits); diff != "" {
				t.Errorf("%s\nstatus.replicas[].reason: -want +got:\n%s", tc.reason, diff)
			}
			// The XR is Ready exactly when PeerRelayReady is True; every
			// composed resource is reported ready, so that Crossplane sends
			// no event per unready resource per pass.
			wantReady := fnv1.Ready_READY_FALSE
			if tc.want.condition.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE {
				wantReady = fnv1.Ready_READY_TRUE
			}
			if got := rsp.GetDesired().GetComposite().GetReady(); got != wantReady {
				t.Errorf("%s\nthe PeerRelay's readiness: want %v, got %v", tc.reason, wantReady, got)
			}
			for k, r := range rsp.GetDesired().GetResources() {
				if r.GetReady() != fnv1.Ready_READY_TRUE {
					t.Errorf("%s\n%s readiness: want READY_TRUE, got %v", tc.reason, k, r.GetReady())
				}
			}
		})
	}
}

// TestRunFunctionRequiresNoSecret: a PeerRelay naming an auth key Secret
// makes the function require no Secret (Crossplane would cache every
// Secret in the cluster for it): the provider reads the key Secret and its
// RelayConfig says when it is missing (TestRunFunctionRelayConfigConditions).
func TestRunFunctionRequiresNoSecret(t *testing.T) {
	rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, "authKeySecretRef: {name: ts-auth}")}})
	for key, sel := range rsp.GetRequirements().GetResources() {
		if sel.GetKind() == "Secret" {
			t.Errorf("the function requires Secret %s (%s): no Secret is required", sel.GetMatchName(), key)
		}
	}
}

func TestRunFunctionSaysWhenNamesAreShortened(t *testing.T) {
	rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(t, `
apiVersion: peerrelay.io/v1alpha1
kind: PeerRelay
metadata: {name: 1-relay.example, namespace: team-a}
spec: {}`)}}})
	var msgs []string
	for _, r := range rsp.GetResults() {
		msgs = append(msgs, r.GetMessage())
	}
	want := "composed objects are named pr-1-relay-example-"
	if len(msgs) != 1 || !strings.Contains(msgs[0], want) || !strings.Contains(msgs[0], "no dots") || !strings.Contains(msgs[0], "must start with a letter") {
		t.Errorf("want one Normal result starting %q and saying why, got %q", want, msgs)
	}
}

// TestRunFunctionRelayConfigConditions: what the RelayConfigs say about
// keys and device cleanup reaches the PeerRelay, and static endpoints alone
// never make a replica ready.
func TestRunFunctionRelayConfigConditions(t *testing.T) {
	rc := func(source string, conds ...string) string {
		y := "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  atProvider: {source: " + source + ", endpoints: [\"198.51.100.1:41641\"]}\n  conditions:\n  - {type: Ready, status: \"True\", reason: Available, lastTransitionTime: \"2026-01-01T00:00:00Z\"}"
		for _, c := range conds {
			y += "\n  - " + c
		}
		return y
	}
	const (
		noKey      = `{type: AuthKeyAvailable, status: "False", reason: NoAuthKey, message: "no auth key: set it", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		keyMissing = `{type: AuthKeyAvailable, status: "False", reason: AuthKeySecretMissing, message: "Secret ts-auth named by spec.authKeySecretRef does not exist", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		budget     = `{type: AuthKeyAvailable, status: "False", reason: MintBudgetSpent, message: "namespace team-a has spent its budget of minted keys", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		noCleanup  = `{type: DeviceCleanup, status: "False", reason: NoAPIAccess, message: "the device stays", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		cleanup    = `{type: DeviceCleanup, status: "True", reason: TailscaleAPI, message: "removed", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		answered   = `{type: Reachable, status: "True", reason: Answered, message: "every advertised endpoint answered", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		partly     = `{type: Reachable, status: "True", reason: PartlyAnswered, message: "198.51.100.1:41641 answered; no answer from 192.0.2.9:41641", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		noAnswer   = `{type: Reachable, status: "False", reason: NoAnswer, message: "no advertised endpoint answered: 198.51.100.1:41641", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		probeFails = `{type: Reachable, status: "Unknown", reason: ProbeFailed, message: "the prober cannot join the tailnet", lastTransitionTime: "2026-01-01T00:00:00Z"}`
		pod        = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nstatus: {readyReplicas: 1}"
		svc        = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nstatus: {loadBalancer: {ingress: [{ip: 198.51.100.1}]}}"
		noIngress  = "apiVersion: v1\nkind: Service\nmetadata: {name: s}"
	)
	cases := map[string]struct {
		reason      string
		tailnet     string
		replicas    int // 1 when 0
		observed    map[string]string
		wantReason  xpv2.ConditionReason
		wantMsg     string
		wantCleanup string // DeviceCleanup's status, "" for no condition
		// wantReachable is status.reachableReplicas, "" when not probed.
		wantReachable string
	}{
		"Reachable": {
			reason:        "With the probe on, a replica whose endpoints answered is ready, and REACHABLE counts it.",
			observed:      map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", answered), "statefulset-0": pod},
			wantReason:    v1alpha1.ReasonReady,
			wantReachable: "1/1",
		},
		"PartlyReachable": {
			reason:        "A replica with one silent endpoint of two is still reachable: clients use the one that answers.",
			observed:      map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", partly), "statefulset-0": pod},
			wantReason:    v1alpha1.ReasonReady,
			wantReachable: "1/1",
		},
		"Unreachable": {
			reason:        "A replica whose endpoints did not answer keeps the PeerRelay not ready, naming it and the provider's reason, while the other is reachable.",
			replicas:      2,
			observed:      map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", answered), "statefulset-0": pod, "service-1": svc, "relayconfig-1": rc("ingress-ip", noAnswer), "statefulset-1": pod},
			wantReason:    v1alpha1.ReasonEndpointsUnreachable,
			wantMsg:       "1 of 2 replicas answered the provider's reachability probe; replica 1: NoAnswer: no advertised endpoint answered: 198.51.100.1:41641",
			wantReachable: "1/2",
		},
		"ProbeTurnedOn": {
			reason:        "Just after the probe is turned on, a replica the provider has not probed yet has no condition: it does not make the PeerRelay unready, though REACHABLE counts only what answered.",
			replicas:      2,
			observed:      map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", answered), "statefulset-0": pod, "service-1": svc, "relayconfig-1": rc("ingress-ip"), "statefulset-1": pod},
			wantReason:    v1alpha1.ReasonReady,
			wantReachable: "1/2",
		},
		"ProbeFailed": {
			reason:        "A probe that cannot run proves nothing either way: the replica stays ready, the message says the probe could not tell, in the provider's words, and REACHABLE does not count it.",
			observed:      map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", probeFails), "statefulset-0": pod},
			wantReason:    v1alpha1.ReasonReady,
			wantMsg:       "; the reachability probe could not tell for 1 of them; replica 0: ProbeFailed: the prober cannot join the tailnet",
			wantReachable: "0/1",
		},
		"StaticOnly": {
			reason:     "Static endpoints alone count, as in the Tailscale operator: a relay behind a port forward has no load balancer of its own.",
			observed:   map[string]string{"service-0": noIngress, "relayconfig-0": rc("static"), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonReady,
		},
		"StaticOnlyNotYetWritten": {
			reason:     "Static endpoints the provider has not yet written into the config do not count.",
			observed:   map[string]string{"service-0": noIngress, "relayconfig-0": "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  conditions:\n  - {type: Ready, status: \"False\", reason: Unavailable, lastTransitionTime: \"2026-01-01T00:00:00Z\"}", "statefulset-0": pod},
			wantReason: v1alpha1.ReasonEndpointsPending,
			wantMsg:    "0 of 1 replicas advertise a public address",
		},
		"LoadBalancer": {
			reason:     "With the load balancer's address the replica is ready; devices leave the tailnet with their replicas, which needs no condition.",
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", cleanup), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonReady,
		},
		"NodeInternalIP": {
			reason:     "A replica advertised on its node's InternalIP is ready, and the message says peers reach it only where that network is routed.",
			observed:   map[string]string{"service-0": noIngress, "relayconfig-0": rc("node-internal-ip", cleanup), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonReady,
			wantMsg:    "replica 0 advertises its node's InternalIP (the node has no ExternalIP)",
		},
		"NodesInternalIP": {
			reason:     "Of two replicas on their nodes' InternalIPs, the message names both, in the plural.",
			replicas:   2,
			observed:   map[string]string{"service-0": noIngress, "relayconfig-0": rc("node-internal-ip", cleanup), "statefulset-0": pod, "service-1": noIngress, "relayconfig-1": rc("node-internal-ip", cleanup), "statefulset-1": pod},
			wantReason: v1alpha1.ReasonReady,
			wantMsg:    "replicas 0, 1 advertise their nodes' InternalIPs (the nodes have no ExternalIP)",
		},
		"TailnetUnavailable": {
			reason:     "A spec.tailnet whose ClusterProviderConfig the provider cannot read is TailnetUnavailable, with the provider's words.",
			tailnet:    "tailnet-b",
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("", `{type: ProviderConfigUsable, status: "False", reason: ProviderConfigUnreadable, message: "cannot get ClusterProviderConfig tailnet-b named by spec.providerConfigRef: not found", lastTransitionTime: "2026-01-01T00:00:00Z"}`), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonTailnetUnavailable,
			wantMsg:    `spec.tailnet "tailnet-b": cannot get ClusterProviderConfig tailnet-b`,
		},
		"TailnetUnavailableWhateverTheWords": {
			reason:     "The condition decides, not its message: a provider that words it differently is understood the same.",
			tailnet:    "tailnet-b",
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("", `{type: ProviderConfigUsable, status: "False", reason: ProviderConfigUnreadable, message: "forbidden", lastTransitionTime: "2026-01-01T00:00:00Z"}`), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonTailnetUnavailable,
			wantMsg:    `spec.tailnet "tailnet-b": forbidden`,
		},
		"PolicyDenied": {
			reason:     "A provider config whose policy leaves the namespace out is TailnetUnavailable, with the policy named, whether or not spec.tailnet is set.",
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("", `{type: ProviderConfigUsable, status: "False", reason: PolicyDenied, message: "ClusterProviderConfig default may not be used from namespace team-a: its spec.policy.namespaces allows [team-b]", lastTransitionTime: "2026-01-01T00:00:00Z"}`), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonTailnetUnavailable,
			wantMsg:    "ClusterProviderConfig default may not be used from namespace team-a: its spec.policy.namespaces allows [team-b] (ask the platform team",
		},
		"SyncedFalseIsNotTailnet": {
			reason:     "A Synced=False that names the ClusterProviderConfig is no longer read: only ProviderConfigUsable says the tailnet is unusable.",
			tailnet:    "tailnet-b",
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", `{type: Synced, status: "False", reason: ReconcileError, message: "connect failed: cannot get ClusterProviderConfig tailnet-b named by spec.providerConfigRef: not found", lastTransitionTime: "2026-01-01T00:00:00Z"}`), "statefulset-0": pod},
			wantReason: v1alpha1.ReasonReady,
		},
		"AuthKeySecretMissing": {
			reason:     "A key Secret the provider cannot find is AuthKeySecretMissing, once for every replica with the same message.",
			replicas:   2,
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", keyMissing), "statefulset-0": pod, "service-1": svc, "relayconfig-1": rc("ingress-ip", keyMissing), "statefulset-1": pod},
			wantReason: relayv1alpha1.ReasonKeySecretMissing,
			wantMsg:    "replicas 0, 1: Secret ts-auth named by spec.authKeySecretRef does not exist",
		},
		"MintBudgetSpent": {
			reason:     "A replica whose key waits on a spent mint budget names the budget on the PeerRelay.",
			observed:   map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", budget), "statefulset-0": pod},
			wantReason: relayv1alpha1.ReasonMintBudgetSpent,
			wantMsg:    "replica 0: namespace team-a has spent its budget of minted keys",
		},
		"NoAuthKey": {
			reason:      "A replica with no key and no way to mint one says so on the PeerRelay, and that its device would stay in the tailnet.",
			observed:    map[string]string{"service-0": svc, "relayconfig-0": rc("ingress-ip", noKey, noCleanup), "statefulset-0": pod},
			wantReason:  relayv1alpha1.ReasonKeyUnavailable,
			wantMsg:     "replica 0: no auth key: set it",
			wantCleanup: "STATUS_CONDITION_FALSE",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := map[string]*fnv1.Resource{}
			for k, y := range tc.observed {
				obs[k] = observedRes(t, y)
			}
			spec := fmt.Sprintf("replicas: %d", max(tc.replicas, 1))
			if tc.tailnet != "" {
				spec += "\ntailnet: " + tc.tailnet
			}
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, spec), Resources: obs}})
			conds := map[string]*fnv1.Condition{}
			for _, c := range rsp.GetConditions() {
				conds[c.GetType()] = c
			}
			if c := conds[string(v1alpha1.ConditionPeerRelayReady)]; c.GetReason() != string(tc.wantReason) || !strings.Contains(c.GetMessage(), tc.wantMsg) {
				t.Errorf("%s\nPeerRelayReady: %s %q, want %s %q", tc.reason, c.GetReason(), c.GetMessage(), tc.wantReason, tc.wantMsg)
			}
			got, _ := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "reachableReplicas").(string)
			if got != tc.wantReachable {
				t.Errorf("%s\nstatus.reachableReplicas (the REACHABLE column): %q, want %q", tc.reason, got, tc.wantReachable)
			}
			cleanup := ""
			if c := conds[string(v1alpha1.ConditionDeviceCleanup)]; c != nil {
				cleanup = c.GetStatus().String()
			}
			if cleanup != tc.wantCleanup {
				t.Errorf("%s\nDeviceCleanup: %q, want %q", tc.reason, cleanup, tc.wantCleanup)
			}
		})
	}
}

// TestRunFunctionReplicaZones: each replica's status says the zone it is
// placed in: its subnet's zone (from the spec, else the provider's check),
// or the zone a node selector pins its pod to.
func TestRunFunctionReplicaZones(t *testing.T) {
	cases := map[string]struct {
		reason   string
		spec     string
		observed map[string]*fnv1.Resource
		want     []string
	}{
		"AWSSubnets": {
			reason: "Replica 0's zone comes from the spec, replica 1's from the provider's check, replica 2's is not known yet.",
			spec: `replicas: 3
aws:
  zonePlacement: PerReplica
  elasticIPs:
  - {subnetID: subnet-0a, allocationID: eipalloc-0a, zone: eu-west-1a}
  - {subnetID: subnet-0b, allocationID: eipalloc-0b}
  - {subnetID: subnet-0c, allocationID: eipalloc-0c}`,
			observed: map[string]*fnv1.Resource{"relayconfig-1": checkedRelayConfig(t, "subnet-0b", "eipalloc-0b", "")},
			want:     []string{"eu-west-1a", "eu-west-1b", ""},
		},
		"NodeSelector": {
			reason: "Without AWS, a node selector on the zone label places every replica there.",
			spec:   "replicas: 2\npod: {nodeSelector: {topology.kubernetes.io/zone: zone-b}}",
			want:   []string{"zone-b", "zone-b"},
		},
		"Unplaced": {
			reason: "Nothing places the replicas: no zone is claimed.",
			spec:   "replicas: 1",
			want:   []string{""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, tc.spec), Resources: podAccess(t, tc.observed)}})
			replicas, _ := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "replicas").([]any)
			var got []string
			for _, r := range replicas {
				z, _ := r.(map[string]any)["zone"].(string)
				got = append(got, z)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatus.replicas[].zone -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRunFunctionReplicaTraffic(t *testing.T) {
	sampled := `    traffic: {sessions: 1, forwardedPackets: 120, forwardedBytes: 15360, sampledAt: "2026-12-06T05:00:00Z"}`
	cases := map[string]struct {
		reason   string
		spec     string
		observed map[string]*fnv1.Resource
		want     []any
	}{
		"Sampled": {
			reason: "With metrics on, each replica shows the provider's last sample of its relay counters; one not sampled yet shows none.",
			spec:   "replicas: 2\nmetrics: {enable: true}",
			observed: map[string]*fnv1.Resource{"relayconfig-1": {Resource: mustStruct(t,
				"apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  atProvider:\n"+sampled)}},
			want: []any{nil, map[string]any{"sessions": 1.0, "forwardedPackets": 120.0, "forwardedBytes": 15360.0, "sampledAt": "2026-12-06T05:00:00Z"}},
		},
		"MetricsTurnedOff": {
			reason: "Once metrics are off, a sample the provider has not cleared yet is not shown: it no longer changes.",
			spec:   "replicas: 1",
			observed: map[string]*fnv1.Resource{"relayconfig-0": {Resource: mustStruct(t,
				"apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  atProvider:\n"+sampled)}},
			want: []any{nil},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, tc.spec), Resources: podAccess(t, tc.observed)}})
			replicas, _ := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "replicas").([]any)
			var got []any
			for _, r := range replicas {
				got = append(got, r.(map[string]any)["traffic"])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatus.replicas[].traffic -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRunFunctionNodeModeReplicaStatus: a NodePort or hostPort replica has
// no load balancer. Its status says so (loadBalancerReady false) whether or
// not it is advertised on its node's address, and while it has none it
// waits for its node's address, not a load balancer's.
func TestRunFunctionNodeModeReplicaStatus(t *testing.T) {
	rc := func(source string) string {
		return "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  atProvider: {source: " + source +
			", endpoints: [\"198.51.100.7:30041\"]}\n  conditions:\n  - {type: Ready, status: \"True\", reason: Available, lastTransitionTime: \"2026-01-01T00:00:00Z\"}"
	}
	const (
		svc       = "apiVersion: v1\nkind: Service\nmetadata: {name: s}"
		pod       = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nstatus: {readyReplicas: 1}"
		noAddress = "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  conditions:\n  - {type: Ready, status: \"False\", reason: Unavailable, lastTransitionTime: \"2026-01-01T00:00:00Z\"}"
	)
	cases := map[string]struct {
		reason   string
		spec     string
		observed map[string]string
		wantWait string
	}{
		"NodePortAdvertised": {
			reason:   "A NodePort replica advertised on its node's ExternalIP is ready, with no load balancer.",
			spec:     "replicas: 1\nservice: {type: NodePort}",
			observed: map[string]string{"service-0": svc, "relayconfig-0": rc("node-external-ip"), "statefulset-0": pod},
		},
		"HostPortOnInternalIP": {
			reason:   "A hostPort replica on its node's InternalIP is ready too.",
			spec:     "replicas: 1\nhostPort: true",
			observed: map[string]string{"service-0": svc, "relayconfig-0": rc("node-internal-ip"), "statefulset-0": pod},
		},
		"NodePortWaiting": {
			reason:   "Before the provider has its node's address, the replica waits for that, not for a load balancer.",
			spec:     "replicas: 1\nservice: {type: NodePort}",
			observed: map[string]string{"service-0": svc, "relayconfig-0": noAddress, "statefulset-0": pod},
			wantWait: "waiting for its node's address (its pod scheduled on a node with one)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := map[string]*fnv1.Resource{}
			for k, y := range tc.observed {
				obs[k] = observedRes(t, y)
			}
			rsp := run(t, &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, tc.spec), Resources: obs}})
			replicas, _ := valueAt(t, rsp.GetDesired().GetComposite().GetResource(), "status", "replicas").([]any)
			if len(replicas) != 1 {
				t.Fatalf("%s\nstatus.replicas: %v", tc.reason, replicas)
			}
			rs, _ := replicas[0].(map[string]any)
			if rs["loadBalancerReady"] != false {
				t.Errorf("%s\nstatus.replicas[0].loadBalancerReady: %v, want false: there is no load balancer", tc.reason, rs["loadBalancerReady"])
			}
			if got, _ := rs["reason"].(string); got != tc.wantWait {
				t.Errorf("%s\nstatus.replicas[0].reason: %q, want %q", tc.reason, got, tc.wantWait)
			}
		})
	}
}

// TestAWSResourcesGateReadiness: a replica whose config advertises its
// address and whose pod is ready is not ready while one of its AWS managed
// resources is not: the NLB's listener pending, the load balancer does not
// carry traffic yet.
func TestAWSResourcesGateReadiness(t *testing.T) {
	mr := func(ready string) string {
		return "apiVersion: elbv2.aws.m.upbound.io/v1beta1\nkind: LBListener\nmetadata: {name: x}\nstatus:\n  conditions: [{type: Ready, status: \"" + ready + "\", reason: Available, lastTransitionTime: \"2026-01-01T00:00:00Z\"}]"
	}
	cases := map[string]struct {
		reason   string
		listener string // the listener's Ready; "" for not observed yet
		want     bool
	}{
		"ListenerPending": {reason: "The listener is not Ready: not ready, and the replica says what it waits for.", listener: "False", want: false},
		"ListenerMissing": {reason: "The listener is composed but not observed yet: not ready.", want: false},
		"EverythingReady": {reason: "Every AWS resource Ready: ready.", listener: "True", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := map[string]string{"service-0": svcWithIP("203.0.113.10"), "relayconfig-0": relayCfg("True", "203.0.113.10:41641"), "statefulset-0": sts(1), "lb-0": mr("True")}
			if tc.listener != "" {
				res["listener-0"] = mr(tc.listener)
			}
			obs := observedState{observed: map[xpresource.Name]xpresource.ObservedComposed{}, awsKeys: map[int][]string{0: {"lb-0", "listener-0"}}}
			for k, y := range res {
				cd := composed.New()
				cd.SetUnstructuredContent(mustStruct(t, y).AsMap())
				obs.observed[xpresource.Name(k)] = xpresource.ObservedComposed{Resource: cd}
			}
			r := testRelay(t, func(r *relay) { r.Replicas = 1 })
			sum := summarise(r, obs)
			if sum.ready != tc.want {
				t.Errorf("%s\nready %v, want %v (%s)", tc.reason, sum.ready, tc.want, sum.msg)
			}
			if got := sum.status.Replicas[0].Reason; !tc.want && !strings.Contains(got, "listener-0") {
				t.Errorf("%s\nreplica 0 waits for %q, want the listener named", tc.reason, got)
			}
		})
	}
}

func TestAWSKeysByReplica(t *testing.T) {
	var objs []composedObject
	for _, k := range []string{"serviceaccount", "eip-0", "service-0", "lb-1", "targetgroup-1", "listener-1", "target-0-10-0-1-5", "relayconfig-1"} {
		objs = append(objs, composedObject{key: k})
	}
	want := map[int][]string{0: {"eip-0", "target-0-10-0-1-5"}, 1: {"lb-1", "targetgroup-1", "listener-1"}}
	if diff := cmp.Diff(want, awsKeysByReplica(objs)); diff != "" {
		t.Errorf("the AWS managed resources by replica, a target's key carrying its pod's IP (-want +got):\n%s", diff)
	}
}
