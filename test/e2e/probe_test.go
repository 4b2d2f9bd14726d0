package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/probe"
	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// TestProbeReachesRelay: a prober that joins the tailnet gets an endpoint
// allocated by a real relay running our config and hears the relay's
// challenge at the address the relay advertises; at an address where
// packets are dropped it hears nothing and says so.
func TestProbeReachesRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := startWorld(t)
	port, relay := w.runRelay(t, "127.0.0.1")
	st, err := relay.LocalClient.StatusWithoutPeers(ctx)
	must(t, err)

	p, err := probe.Join(ctx, probe.Options{ControlURL: w.URL, AuthKey: "tskey-auth-probe", Hostname: "peerrelay-probe", Logf: t.Logf})
	must(t, err)
	defer p.Close()

	dev, ok := p.Peer(st.Self.ID)
	if !ok {
		t.Fatalf("the relay %s is not in the prober's netmap", st.Self.ID)
	}
	if _, ok := p.Peer("nope"); ok {
		t.Error("an unknown device ID was found in the netmap")
	}
	advertised := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	if err := p.Probe(ctx, dev, advertised, 30*time.Second); err != nil {
		t.Fatalf("probe of the advertised %s: %v", advertised, err)
	}

	// A black hole: a socket that reads and never answers, as a wrong-zone
	// Elastic IP or a firewall that drops does.
	// On an address of its own: a static entry for the relay's own address
	// would replace its endpoint (a static entry's port wins).
	hole, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	must(t, err)
	defer func() { _ = hole.Close() }()
	dropped := hole.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := p.Probe(ctx, dev, dropped, 5*time.Second); !errors.Is(err, probe.ErrNoAnswer) {
		t.Errorf("probe of %s, which drops everything: got %v, want %v", dropped, err, probe.ErrNoAnswer)
	}
}

// TestProviderProbesReplicas: once spec.probe is in its provider config,
// the provider joins the tailnet as a prober of its own and reports each
// replica's Reachable condition from the real relay's answers: pending
// until the replica's device is known, Answered when its one endpoint
// answers, PartlyAnswered naming the address that does not once a static
// endpoint that drops everything is advertised too. The probe is turned
// on after the RelayConfig exists, and the provider polls once an hour
// here: the change reaches the RelayConfig through the provider config's
// watch.
func TestProviderProbesReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api := tailnettest.StartFakeAPI(t)
	w := startWorldWith(t, v1alpha1.ProviderConfigSpec{
		Tailscale: &v1alpha1.TailscaleAPI{BaseURL: api.URL, OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth", Namespace: "default"}},
	})
	pe := w.provider
	must(t, pe.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ts-oauth"},
		Data: map[string][]byte{"client_id": []byte("client-id"), "client_secret": []byte("client-secret")}}))
	port := w.addRelay(t, "127.0.0.1")
	rc := types.NamespacedName{Namespace: pe.NS, Name: "relay-0"}
	harness.Eventually(t, time.Minute, "the RelayConfig resolved", func(ctx context.Context) error {
		r := &v1alpha1.RelayConfig{}
		if err := pe.Client.Get(ctx, rc, r); err != nil {
			return err
		}
		if len(r.Status.AtProvider.Endpoints) == 0 {
			return fmt.Errorf("no endpoints yet")
		}
		return nil
	})
	harness.Eventually(t, 30*time.Second, "spec.probe in the provider config", func(ctx context.Context) error {
		pc := &v1alpha1.ClusterProviderConfig{}
		if err := pe.Client.Get(ctx, types.NamespacedName{Name: "default"}, pc); err != nil {
			return err
		}
		pc.Spec.Probe = &v1alpha1.Probe{Tags: []string{"tag:probe"}}
		return pe.Client.Update(ctx, pc)
	})
	waitReachable(t, pe, rc, v1alpha1.ReasonProbePending)

	cfgFile := filepath.Join(t.TempDir(), tsconfig.FileName)
	waitForConfig(t, pe, cfgFile, []string{fmt.Sprintf("127.0.0.1:%d", port)})
	relay := w.startTailscaled(t, cfgFile, nil)
	tailnet.WaitRunning(t, relay.LocalClient, time.Minute)
	st, err := relay.LocalClient.StatusWithoutPeers(ctx)
	must(t, err)
	// What containerboot does in a pod: the device's ID in the state Secret
	// the provider made for it.
	setRelayConfig(t, pe, rc, func(p *v1alpha1.RelayConfigParameters) { p.StateSecretName = "relay-0-state" })
	harness.Eventually(t, time.Minute, "device ID in the state Secret", func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := pe.Client.Get(ctx, types.NamespacedName{Namespace: pe.NS, Name: "relay-0-state"}, s); err != nil {
			return err
		}
		s.Data = map[string][]byte{"device_id": []byte(st.Self.ID)}
		return pe.Client.Update(ctx, s)
	})
	c := waitReachable(t, pe, rc, v1alpha1.ReasonAnswered)
	if c.Status != corev1.ConditionTrue {
		t.Errorf("Reachable: %s, want True", c.Status)
	}
	// The Service's ingress has no ipMode (as MetalLB's): on a cluster,
	// kube-proxy would answer for it, so the message says the probe did
	// not cross a load balancer.
	if want := fmt.Sprintf("127.0.0.1:%d answered from inside the cluster", port); !strings.Contains(c.Message, want) {
		t.Errorf("Reachable message %q: want it to say %q", c.Message, want)
	}
	// The prober's key was minted as an ephemeral, tagged one.
	var proberKeys int
	for _, call := range api.Recorded() {
		if call.Method == "POST" && call.Path == "/api/v2/tailnet/-/keys" && call.Body["description"] == "peer relay prober" {
			proberKeys++
			create := call.Body["capabilities"].(map[string]any)["devices"].(map[string]any)["create"].(map[string]any)
			if create["ephemeral"] != true || fmt.Sprint(create["tags"]) != "[tag:probe]" {
				t.Errorf("the prober's key: %v, want ephemeral with [tag:probe]", create)
			}
		}
	}
	if proberKeys != 1 {
		t.Errorf("%d prober keys minted, want 1", proberKeys)
	}

	// On an address of its own: a static entry for the relay's own address
	// would replace its endpoint (a static entry's port wins).
	hole, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	must(t, err)
	defer func() { _ = hole.Close() }()
	dropped := hole.LocalAddr().String()
	setRelayConfig(t, pe, rc, func(p *v1alpha1.RelayConfigParameters) { p.StaticEndpoints = []string{dropped} })
	c = waitReachable(t, pe, rc, v1alpha1.ReasonPartlyAnswered)
	if c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "no answer from "+dropped) {
		t.Errorf("Reachable with a dropping static endpoint: %s %q, want True naming %s", c.Status, c.Message, dropped)
	}
}

// waitReachable waits for the RelayConfig's Reachable condition to have
// reason and returns it.
func waitReachable(t *testing.T, pe *providertest.Env, rc types.NamespacedName, reason xpv2.ConditionReason) xpv2.Condition {
	t.Helper()
	var got xpv2.Condition
	harness.Eventually(t, time.Minute, "Reachable reason "+string(reason), func(ctx context.Context) error {
		r := &v1alpha1.RelayConfig{}
		if err := pe.Client.Get(ctx, rc, r); err != nil {
			return err
		}
		got = r.GetCondition(v1alpha1.ConditionReachable)
		if got.Reason != reason {
			return fmt.Errorf("Reachable %s %s: %s", got.Status, got.Reason, got.Message)
		}
		return nil
	})
	return got
}

// setRelayConfig changes the RelayConfig's parameters.
func setRelayConfig(t *testing.T, pe *providertest.Env, rc types.NamespacedName, change func(*v1alpha1.RelayConfigParameters)) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "RelayConfig updated", func(ctx context.Context) error {
		r := &v1alpha1.RelayConfig{}
		if err := pe.Client.Get(ctx, rc, r); err != nil {
			return err
		}
		change(&r.Spec.ForProvider)
		return pe.Client.Update(ctx, r)
	})
}
