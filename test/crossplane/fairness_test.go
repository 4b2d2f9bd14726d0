package crossplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
)

const (
	// silentNamespace is a tenant's whose replicas advertise an address
	// that drops everything, so that each probe of them waits out the
	// probe timeout.
	silentNamespace = "team-silent"
	silentReplicas  = 100
	// fairnessBound is how long the victim's load balancer change may
	// take beside them; alone it takes about 0.13 s. With probes on the
	// reconcile path (before e981eee) 100 silent replicas held the
	// provider's workers 5 s each and the change waited minutes; with one
	// global reconcile bucket (before fairReconciler) it waited 11.7 s
	// behind their first reconciles.
	fairnessBound = 3 * time.Second
)

// silentNeighbours times victim replica 0's load balancer address change
// (Service ingress → its config Secret advertises it) alone, then beside a
// tenant (with RelayConfigs to write: T2) of silentReplicas replicas on the
// same probing provider config, each claiming the victim's relay device and
// advertising a silent address: while their first reconciles run, and
// once their probes are failing. Their reconciles wait in their
// namespace's bucket (fairReconciler) and their probes run on the probe
// workers, fair per namespace: the victim's change reaches its config
// within fairnessBound. The ratio is the benchmark's to report
// (BenchmarkProbeFairness); this is the real system's.
func (s *system) silentNeighbours(ctx context.Context, t *testing.T, victimNS, victim, providerConfig string) {
	alone := s.timeAddressChanges(ctx, t, victimNS, victim, "198.51.100.60", "198.51.100.61", "198.51.100.62")

	silent := netip.MustParseAddr("198.51.100.49")
	s.node.HostAddress(t, silent)
	hole, err := net.ListenUDP("udp4", &net.UDPAddr{IP: silent.AsSlice(), Port: relayPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hole.Close() })
	rc, err := s.Get(ctx, relayAPI, "RelayConfig", victimNS, relayConfigName(victim, 0))
	if err != nil {
		t.Fatal(err)
	}
	device, _, _ := unstructured.NestedString(rc.Object, "status", "atProvider", "deviceID")
	if device == "" {
		t.Fatalf("RelayConfig %s/%s records no device", victimNS, rc.GetName())
	}
	s.namespaceWithKey(t, silentNamespace)
	items := make([]string, silentReplicas)
	for i := range items {
		name := fmt.Sprintf("h-%d", i)
		items[i] = fmt.Sprintf(`{"apiVersion":%q,"kind":"RelayConfig","metadata":{"name":%q,"namespace":%q},"spec":{"providerConfigRef":{"kind":"ClusterProviderConfig","name":%q},"forProvider":{"configSecretName":%q,"stateSecretName":%q,"hostname":%q,"port":%d,"staticEndpoints":[%q],"authKeySecretRef":{"name":"tailscale-auth"}}}}`,
			relayAPI, name, silentNamespace, providerConfig, name+"-config", name+"-state", name, relayPort, netip.AddrPortFrom(silent, relayPort).String())
	}
	s.applyJSON(t, `{"apiVersion":"v1","kind":"List","items":[`+strings.Join(items, ",")+`]}`)
	// What containerboot would write, were the device theirs.
	for i := range silentReplicas {
		harness.Eventually(t, time.Minute, "device ID in a silent replica's state Secret", func(ctx context.Context) error {
			st := &corev1.Secret{}
			if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: silentNamespace, Name: fmt.Sprintf("h-%d-state", i)}, st); err != nil {
				return err
			}
			st.Data = map[string][]byte{"device_id": []byte(device)}
			return s.Admin.Update(ctx, st)
		})
	}
	burst := s.timeAddressChanges(ctx, t, victimNS, victim, "198.51.100.63", "198.51.100.64", "198.51.100.65")
	harness.Eventually(t, 2*time.Minute, "a silent replica probed and found silent", func(ctx context.Context) error {
		rcs, err := s.List(ctx, relayAPI, "RelayConfig", silentNamespace)
		if err != nil {
			return err
		}
		for _, rc := range rcs {
			if st, msg := condition(&rc, relayv1alpha1.ConditionReachable); st == "False" && strings.HasPrefix(msg, string(relayv1alpha1.ReasonNoAnswer)+": ") {
				return nil
			}
		}
		return fmt.Errorf("no silent replica has Reachable NoAnswer yet")
	})
	probed := s.timeAddressChanges(ctx, t, victimNS, victim, "198.51.100.66", "198.51.100.67", "198.51.100.68")
	t.Logf("victim's load balancer change → config: alone %v; beside %d silent replicas, during their first reconciles %v, once probed %v",
		alone, silentReplicas, burst, probed)
	if worst := slices.Max(append(burst, probed...)); worst > fairnessBound {
		t.Errorf("beside %d silent replicas the victim's load balancer change took up to %v to reach its config (alone %v, during their first reconciles %v, once probed %v), want ≤ %v",
			silentReplicas, worst, alone, burst, probed, fairnessBound)
	}

	deleted := time.Now()
	if out, err := s.Kubectl(t, "delete", "namespace", silentNamespace, "--timeout=3m"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("namespace %s (%d RelayConfigs) gone in %v", silentNamespace, silentReplicas, time.Since(deleted).Round(time.Second))
}

// timeAddressChanges gives replica 0 of PeerRelay ns/name each address in
// turn and returns how long each took to be advertised in its config.
func (s *system) timeAddressChanges(ctx context.Context, t *testing.T, ns, name string, addrs ...string) []time.Duration {
	t.Helper()
	svc, cfg := relayConfigName(name, 0), relayConfigName(name, 0)+"-config"
	var took []time.Duration
	for _, a := range addrs {
		want := fmt.Sprintf(`"%s:%d"`, a, relayPort)
		start := time.Now()
		if err := s.cloud.setAddress(ctx, ns, svc, a); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 2*time.Minute, "config "+cfg+" advertising "+want, func(ctx context.Context) error {
			sec := &corev1.Secret{}
			if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: cfg}, sec); err != nil {
				return err
			}
			if !strings.Contains(string(sec.Data[tsconfig.FileName]), want) {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		took = append(took, time.Since(start).Round(10*time.Millisecond))
	}
	return took
}
