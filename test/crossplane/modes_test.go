package crossplane

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
)

// modes: the kinds of cluster and network a PeerRelay is deployed in, each
// through real Crossplane to PeerRelayReady with the README's commands, and
// what the relay advertises read from its running tailscaled.
func (s *system) modes(ctx context.Context, t *testing.T) {
	s.readme(t, "### Clusters and networks", true)

	// Behind NAT on a dual-stack cluster, in the Tailscale operator's words
	// (spec.service.port, spec.staticEndpoints): the Service, the listener
	// and the load balancer endpoints are on port 6969; the router forwards
	// another port to the IPv4 address, so that static entry's port wins
	// for it; the IPv6 address is reached directly.
	t.Run("ServicePortDualStackBehindNAT", func(t *testing.T) {
		const ns, name = "team-nat", "nat-relay"
		s.waitRelayPrefsOn(t, s.localClient(t, ns, name+"-0-0"), 6969, []netip.AddrPort{
			netip.MustParseAddrPort("198.51.100.20:6969"),
			netip.MustParseAddrPort("203.0.113.10:16969"),
			netip.MustParseAddrPort("[2001:db8::10]:6969"),
		})
		svc := &corev1.Service{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, svc); err != nil {
			t.Fatal(err)
		}
		if p := svc.Spec.Ports[0]; p.Port != 6969 || p.TargetPort.IntValue() != 6969 || p.Protocol != corev1.ProtocolUDP {
			t.Errorf("Service port %d → %s/%s, want UDP 6969 → 6969", p.Port, p.TargetPort.String(), p.Protocol)
		}
		if !slices.Equal(svc.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}) {
			t.Errorf("Service IP families %v: the Service did not ask the dual-stack cluster for both", svc.Spec.IPFamilies)
		}
		pr, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
		if err != nil {
			t.Fatal(err)
		}
		reps, _, _ := unstructured.NestedSlice(pr.Object, "status", "replicas")
		if len(reps) != 1 {
			t.Fatalf("status.replicas %v", reps)
		}
		eps, _, _ := unstructured.NestedStringSlice(reps[0].(map[string]any), "endpoints")
		if w := []string{"198.51.100.20:6969", "203.0.113.10:16969", "[2001:db8::10]:6969"}; !slices.Equal(eps, w) {
			t.Errorf("status.replicas[0].endpoints %v, want %v", eps, w)
		}
		s.deletePeerRelay(t, ns, name)
	})

	// A cluster with no load balancer for the relay (its Service stays
	// pending): the static endpoints alone make the replica addressed, as in
	// the Tailscale operator, and Crossplane's Ready agrees.
	t.Run("StaticEndpointsOnly", func(t *testing.T) {
		const ns, name = "team-edge", "edge-relay"
		s.waitRelayPrefs(t, s.localClient(t, ns, name+"-0-0"), []netip.AddrPort{netip.MustParseAddrPort("198.51.100.30:41641")})
		pr := s.waitReady(ctx, t, ns, name, time.Minute)
		reps, _, _ := unstructured.NestedSlice(pr.Object, "status", "replicas")
		if len(reps) != 1 || reps[0].(map[string]any)["loadBalancerReady"] != false {
			t.Errorf("status.replicas %v: want one replica whose loadBalancerReady is false (its Service has no address)", reps)
		}
		svc := &corev1.Service{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, svc); err != nil {
			t.Fatal(err)
		}
		if len(svc.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("the Service got a load balancer address %v: the test proves nothing", svc.Status.LoadBalancer.Ingress)
		}
		s.deletePeerRelay(t, ns, name)
	})

	// No load balancer: a NodePort Service, or the relay's port bound on
	// the node. Each replica advertises its node's address (an InternalIP:
	// the test node has no ExternalIP, which the PeerRelay says).
	t.Run("NodePort", func(t *testing.T) {
		const ns, name = "team-edge", "nodeport-relay"
		svc := &corev1.Service{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, svc); err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || svc.Spec.Ports[0].NodePort == 0 {
			t.Fatalf("Service %s: type %s, traffic policy %s, node port %d", svc.Name, svc.Spec.Type, svc.Spec.ExternalTrafficPolicy, svc.Spec.Ports[0].NodePort)
		}
		want := netip.AddrPortFrom(s.node.Address(), uint16(svc.Spec.Ports[0].NodePort))
		s.waitRelayPrefs(t, s.localClient(t, ns, name+"-0-0"), []netip.AddrPort{want})
		s.saysInternal(ctx, t, ns, name)
		s.deletePeerRelay(t, ns, name)
	})
	t.Run("HostPort", func(t *testing.T) {
		const ns, name = "team-edge", "hostport-relay"
		s.waitRelayPrefsOn(t, s.localClient(t, ns, name+"-0-0"), 41642, []netip.AddrPort{netip.AddrPortFrom(s.node.Address(), 41642)})
		s.saysInternal(ctx, t, ns, name)
		s.deletePeerRelay(t, ns, name)
	})

	// A node drain evicts through the API, which honours the PeerRelay's
	// PodDisruptionBudget: one replica at a time, the other left running.
	t.Run("Drain", func(t *testing.T) { s.drain(ctx, t, "team-nat") })
}

func (s *system) drain(ctx context.Context, t *testing.T, ns string) {
	const name = "drain"
	s.applyPeerRelay(t, ns, name, "replicas: 2\nauthKeySecretRef: {name: tailscale-auth, key: authkey}")
	s.waitReady(ctx, t, ns, name, 3*time.Minute)
	cs := kubernetes.NewForConfigOrDie(s.AdminConfig)
	harness.Eventually(t, time.Minute, "the PodDisruptionBudget allows one disruption of two healthy pods", func(context.Context) error {
		pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := pdb.Status; st.ExpectedPods != 2 || st.CurrentHealthy != 2 || st.DisruptionsAllowed != 1 {
			return fmt.Errorf("status: expected %d, healthy %d, allowed %d", st.ExpectedPods, st.CurrentHealthy, st.DisruptionsAllowed)
		}
		return nil
	})
	before := s.relayPods(ctx, t, ns, name)
	evict := func(pod string) error {
		return cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
	}
	if err := evict(name + "-0-0"); err != nil {
		t.Fatalf("evicting the first replica's pod: %v", err)
	}
	// kubectl drain asks again every 5 s while the budget says no; so do we,
	// for as long as the first replica is away.
	err := evict(name + "-1-0")
	if !kerrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the second replica's pod while the first is away: want 429 (the budget refuses), got %v", err)
	}
	if !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("the refusal does not name the budget: %v", err)
	}
	// The first comes back on its own; the second never stopped.
	harness.Eventually(t, 3*time.Minute, "replica 0's pod replaced and ready", func(context.Context) error {
		p := &corev1.Pod{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0-0"}, p); err != nil {
			return err
		}
		if p.UID == before[p.Name] || !harness.PodReady(p) {
			return fmt.Errorf("pod %s (uid %s) ready %v", p.Name, p.UID, harness.PodReady(p))
		}
		return nil
	})
	s.waitReady(ctx, t, ns, name, time.Minute)
	after := s.relayPods(ctx, t, ns, name)
	if after[name+"-1-0"] != before[name+"-1-0"] {
		t.Errorf("replica 1's pod was replaced (%s → %s): the budget did not hold", before[name+"-1-0"], after[name+"-1-0"])
	}
	if n := s.restarts(ctx, t, ns, name+"-1-0"); n != 0 {
		t.Errorf("replica 1's container restarted %d times", n)
	}

	// A change of the pod template (here its annotations) restarts every
	// replica, one at a time: the next waits until the previous is ready.
	t.Run("Rollout", func(t *testing.T) {
		before := s.relayPods(ctx, t, ns, name)
		if out, err := s.Kubectl(t, "-n", ns, "patch", "peerrelay", name, "--type=merge", "-p", `{"spec":{"pod":{"annotations":{"example.com/rollout":"2"}}}}`); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		fewest, replaced := 2, 0
		deadline := time.Now().Add(3 * time.Minute)
		for replaced < 2 && time.Now().Before(deadline) {
			pods := &corev1.PodList{}
			if err := s.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
				t.Fatal(err)
			}
			ready := 0
			replaced = 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && harness.PodReady(&p) {
					ready++
				}
				if p.UID != before[p.Name] && harness.PodReady(&p) && p.Annotations["example.com/rollout"] == "2" {
					replaced++
				}
			}
			fewest = min(fewest, ready)
			time.Sleep(100 * time.Millisecond)
		}
		if replaced < 2 {
			t.Fatalf("after 3 minutes %d of 2 pods run the new template", replaced)
		}
		if fewest < 1 {
			t.Errorf("during the rollout %d relay pods were ready at once: every replica was down together", fewest)
		}
		s.waitReady(ctx, t, ns, name, time.Minute)
	})
	s.deletePeerRelay(t, ns, name)
}

// deletePeerRelay deletes a v2 PeerRelay and does not wait: its relays stop
// in the background rather than load the rest of the suite.
func (s *system) deletePeerRelay(t *testing.T, ns, name string) {
	t.Helper()
	if out, err := s.Kubectl(t, "-n", ns, "delete", "peerrelay", name, "--wait=false"); err != nil {
		t.Errorf("kubectl delete peerrelay %s: %v\n%s", name, err, out)
	}
}

// saysInternal checks that a ready PeerRelay says its replica advertises
// its node's InternalIP.
func (s *system) saysInternal(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	pr, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if st, msg := condition(pr, v1alpha1.ConditionPeerRelayReady); st != "True" || !strings.Contains(msg, "advertises its node's InternalIP") {
		t.Errorf("PeerRelayReady %s: %s; want it to say the node's InternalIP is advertised", st, msg)
	}
}
