package crossplane

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
	cloudharness "github.com/peerrelay/peerrelay/test/harness/cloud"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// reachability: with spec.probe in its ClusterProviderConfig, the provider
// (from its package, in its pod) joins the tailnet as a prober and knocks
// on each replica's advertised address. Here those addresses are load
// balancers for real: each forwards its front address to its replica's
// pod. One of them starts losing every packet, as an Elastic IP in the
// wrong zone does: that replica turns Reachable=False and the PeerRelay
// not ready, naming it, while the other stays reachable; when the path
// heals, the PeerRelay is ready again. Last, a tenant's silentReplicas
// silent replicas on the same provider config do not hold back a load
// balancer change of this one (silentNeighbours).
func (s *system) reachability(ctx context.Context, t *testing.T) {
	const ns, name, tailnet = "team-probe", "relay", "probed"
	s.probing(ctx, t, fmt.Sprintf(`{"apiVersion":%q,"kind":"ClusterProviderConfig","metadata":{"name":%q},"spec":{}}`, relayAPI, tailnet))
	lbs := s.loadBalancers(ctx, t, ns, name, "198.51.100.40", "198.51.100.41")
	s.namespaceWithKey(t, ns)
	s.applyPeerRelay(t, ns, name, "replicas: 2\nauthKeySecretRef: {name: tailscale-auth, key: authkey}\ntailnet: "+tailnet+"\nmetrics: {enable: true}")
	s.waitReady(ctx, t, ns, name, 3*time.Minute)
	s.waitReachable(ctx, t, ns, name, "2/2", "True", "True")
	prom := s.prometheus(ctx, t, ns, name, 2)
	out, err := s.Kubectl(t, "-n", ns, "get", "peerrelay", name, "--no-headers")
	if f := strings.Fields(out); err != nil || len(f) < 4 || f[2] != "2/2" || f[3] != "2/2" {
		t.Errorf("kubectl get peerrelay: want REPLICAS 2/2 and REACHABLE 2/2:\n%s (%v)", out, err)
	}

	lost := time.Now()
	lbs[1].Drop(true)
	s.waitReachable(ctx, t, ns, name, "1/2", "True", "False")
	t.Logf("path lost → Reachable=False: %v", time.Since(lost).Round(100*time.Millisecond))
	// Crossplane writes the condition apart from the status fields: it may
	// come a moment later.
	harness.Eventually(t, 30*time.Second, "PeerRelayReady=False naming replica 1", func(ctx context.Context) error {
		pr, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
		if err != nil {
			return err
		}
		st, msg := condition(pr, v1alpha1.ConditionPeerRelayReady)
		if st != "False" || !strings.HasPrefix(msg, string(v1alpha1.ReasonEndpointsUnreachable)+": ") || !strings.Contains(msg, "replica 1: NoAnswer") || !strings.Contains(msg, "198.51.100.41:41641") {
			return fmt.Errorf("PeerRelayReady %s %q", st, msg)
		}
		return nil
	})
	harness.Eventually(t, 30*time.Second, "a Warning event names the unreachable replica", func(ctx context.Context) error {
		return s.eventContains(ctx, ns, name, "replica 1 (relay-1): its endpoints did not answer the reachability probe")
	})
	// The provider's metrics say the same, per replica, as the dashboard
	// shows them.
	harness.Eventually(t, 30*time.Second, "the provider's reachability metrics", func(ctx context.Context) error {
		body, err := s.providerScrape(ctx)
		if err != nil {
			return err
		}
		for _, want := range []string{
			`peerrelay_replica_reachable{namespace="team-probe",relayconfig="` + relayConfigName(name, 0) + `"} 1`,
			`peerrelay_replica_reachable{namespace="team-probe",relayconfig="` + relayConfigName(name, 1) + `"} 0`,
			`peerrelay_probes_total{outcome="no_answer"}`,
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %s", want)
			}
		}
		if m := missing(dashboardMetrics(t, "peerrelay_"), "\n"+body); len(m) > 0 {
			return fmt.Errorf("docs/grafana-dashboard.json queries %v, which the provider does not export", m)
		}
		return nil
	})

	// A real Prometheus scraping the provider and the relays answers
	// every query of the dashboard, evaluates every alert rule, and fires
	// the one for this replica.
	s.dashboardAnswers(ctx, t, prom, ns)
	waitAlerts(ctx, t, prom, "PeerRelayReplicaUnreachable "+relayConfigName(name, 1))

	lbs[1].Drop(false)
	s.waitReachable(ctx, t, ns, name, "2/2", "True", "True")
	s.waitReady(ctx, t, ns, name, time.Minute)
	waitAlerts(ctx, t, prom)

	// At rest the probes go on and write nothing: a probe that finds what
	// the last one found changes no condition.
	time.Sleep(5 * time.Second)
	before, answeredBefore := s.relayConfigWrites(ns), s.probesAnswered(ctx, t)
	time.Sleep(40 * time.Second)
	after, answeredAfter := s.relayConfigWrites(ns), s.probesAnswered(ctx, t)
	if answeredAfter <= answeredBefore {
		t.Errorf("no probe answered in 40 s with a 30 s interval: %v → %v", answeredBefore, answeredAfter)
	}
	for k, n := range after {
		if n != before[k] {
			t.Errorf("RelayConfig %s written %d times in 40 s at rest while probed", k, n-before[k])
		}
	}
	t.Logf("at rest for 40 s: %v probes answered, RelayConfig writes %v → %v", answeredAfter-answeredBefore, before, after)
	s.silentNeighbours(ctx, t, ns, name, tailnet)
	if out, err := s.Kubectl(t, "delete", "namespace", ns, "--timeout=2m"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// probing turns the probe on in the ClusterProviderConfig cpc (its JSON,
// applied with spec.tailscale and spec.probe added), with the Tailscale
// API's contract fake for the prober's key, and has the provider trust the
// control server's CA; the provider goes back to its image's roots when the
// test ends.
func (s *system) probing(ctx context.Context, t testing.TB, cpc string) {
	t.Helper()
	_, tailscale := s.fakeTailscaleAPI(t, "probe-oauth")
	// The control server here has a certificate of the test's CA, as a
	// self-hosted one may: the provider's pods are told to trust it, as a
	// platform would through the runtime config.
	s.applyJSON(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"tailnet-ca","namespace":%q},"data":{"ca.crt":%q}}`, xpharness.CrossplaneNamespace, s.tailnet.CA))
	s.providerReplicasWithCA(ctx, t, 1, "tailnet-ca")
	t.Cleanup(func() { s.providerReplicasWithCA(context.Background(), t, 1, "") })
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(cpc)); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedMap(u.Object, tailscale, "spec", "tailscale")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"tags": []any{"tag:probe"}, "interval": "30s"}, "spec", "probe")
	b, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s.applyJSON(t, string(b))
}

// loadBalancers puts a UDP load balancer on each front address (one per
// replica of PeerRelay ns/name), forwarding to the replica's pod, and has
// the cloud give the replicas' Services those addresses.
func (s *system) loadBalancers(ctx context.Context, t testing.TB, ns, name string, fronts ...string) []*cloudharness.UDPLoadBalancer {
	t.Helper()
	lbs := make([]*cloudharness.UDPLoadBalancer, len(fronts))
	for i, f := range fronts {
		front := netip.AddrPortFrom(netip.MustParseAddr(f), relayPort)
		s.node.HostAddress(t, front.Addr())
		pod := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("%s-%d-0", name, i)}
		lbs[i] = cloudharness.StartUDPLoadBalancer(t, front, func() (netip.AddrPort, bool) {
			p := &corev1.Pod{}
			if err := s.Admin.Get(ctx, pod, p); err != nil || p.Status.PodIP == "" {
				return netip.AddrPort{}, false
			}
			return netip.AddrPortFrom(netip.MustParseAddr(p.Status.PodIP), relayPort), true
		})
		// The Service may not exist yet: the address is kept for when it does.
		s.cloud.proxy(front.Addr().String())
		_ = s.cloud.setAddress(ctx, ns, fmt.Sprintf("%s-%d", name, i), front.Addr().String())
	}
	return lbs
}

// waitReachable waits for the PeerRelay's REACHABLE column and each
// replica's reachable status, and returns the PeerRelay.
func (s *system) waitReachable(ctx context.Context, t *testing.T, ns, name, column string, replicas ...string) *unstructured.Unstructured {
	t.Helper()
	var pr *unstructured.Unstructured
	var seen string
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("REACHABLE %s, replicas %v", column, replicas), func(context.Context) error {
		var err error
		if pr, err = s.Get(ctx, v2API, "PeerRelay", ns, name); err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(pr.Object, "status", "reachableReplicas")
		rs, _, _ := unstructured.NestedSlice(pr.Object, "status", "replicas")
		var each []string
		for _, r := range rs {
			v, _ := r.(map[string]any)["reachable"].(string)
			each = append(each, v)
		}
		if got != column || fmt.Sprint(each) != fmt.Sprint(replicas) {
			_, msg := condition(pr, v1alpha1.ConditionPeerRelayReady)
			if msg != seen {
				// What the wait went through, for a slow or failed run.
				t.Logf("REACHABLE %q, replicas %v; PeerRelayReady %s", got, each, msg)
				seen = msg
			}
			return fmt.Errorf("REACHABLE %q, replicas %v; PeerRelayReady %s", got, each, msg)
		}
		return nil
	})
	return pr
}

// relayConfigWrites counts the writes to the RelayConfigs of ns.
func (s *system) relayConfigWrites(ns string) map[string]int { return s.writes.relayConfigWrites(ns) }

// relayConfigName is the name of replica i's RelayConfig.
func relayConfigName(name string, i int) string { return fmt.Sprintf("%s-%d", name, i) }

// providerScrape returns the metrics of the provider pod that probes (the
// one that has probed: the leader).
func (s *system) providerScrape(ctx context.Context) (string, error) {
	pods := &corev1.PodList{}
	if err := s.Admin.List(ctx, pods, client.InNamespace(xpharness.CrossplaneNamespace)); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, providerName) || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		body, err := scrapeMetrics(ctx, p.Status.PodIP, 8080)
		if err == nil && strings.Contains(body, "\npeerrelay_replica_reachable{") {
			return body, nil
		}
	}
	return "", fmt.Errorf("no provider pod reports a probed replica")
}

// probesAnswered is the provider's count of probes every endpoint answered.
func (s *system) probesAnswered(ctx context.Context, t *testing.T) float64 {
	return s.providerCounter(ctx, t, `peerrelay_probes_total{outcome="answered"}`)
}

// providerCounter is a series of the provider's metrics summed over its
// pods: only the leader reconciles, the others export the series at zero.
// A provider pod with no such series fails the test.
func (s *system) providerCounter(ctx context.Context, t *testing.T, series string) float64 {
	t.Helper()
	pods := &corev1.PodList{}
	if err := s.Admin.List(ctx, pods, client.InNamespace(xpharness.CrossplaneNamespace)); err != nil {
		t.Fatal(err)
	}
	total, found := 0.0, false
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, providerName) || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		body, err := scrapeMetrics(ctx, p.Status.PodIP, 8080)
		if err != nil {
			continue // a pod going away
		}
		for l := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), series+" "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				total, found = total+n, true
			}
		}
	}
	if !found {
		t.Fatalf("no provider pod exports %s", series)
	}
	return total
}
