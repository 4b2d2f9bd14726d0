package crossplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
)

// minimalNoKey: the Tailscale operator guide's minimal PeerRelay, with only
// the apiVersion changed, under the provider config the packages ship
// (no Tailscale API access): nothing can log its device in, and the
// PeerRelay says exactly that, and that its device would stay in the
// tailnet.
func (s *system) minimalNoKey(ctx context.Context, t *testing.T) {
	const ns, name = "team-min", "minimal"
	if out, err := s.Kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pr := fmt.Sprintf("apiVersion: %s\nkind: PeerRelay\nmetadata: {name: %s, namespace: %s}\nspec:\n  replicas: 1\n", v2API, name, ns)
	if out, err := s.KubectlIn(t, []byte(pr), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	harness.Eventually(t, 90*time.Second, "PeerRelayReady says no key can be had", func(context.Context) error {
		u, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
		if err != nil {
			return err
		}
		st, msg := condition(u, v1alpha1.ConditionPeerRelayReady)
		if st != "False" || !strings.HasPrefix(msg, string(relayv1alpha1.ReasonKeyUnavailable)+": ") || !strings.Contains(msg, "authKeySecretRef") || !strings.Contains(msg, "spec.tailscale") {
			return fmt.Errorf("PeerRelayReady %q %q", st, msg)
		}
		if st, msg := condition(u, v1alpha1.ConditionDeviceCleanup); st != "False" || !strings.HasPrefix(msg, string(relayv1alpha1.ReasonNoAPIAccess)+": ") {
			return fmt.Errorf("DeviceCleanup %q %q", st, msg)
		}
		return nil
	})
	if out, err := s.Kubectl(t, "delete", "namespace", ns, "--timeout=120s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// tailnetUnavailable: a PeerRelay whose spec.tailnet names no
// ClusterProviderConfig says TailnetUnavailable, with the provider's own
// words, from the RelayConfigs' ProviderConfigUsable condition (the
// function reads conditions, never messages); once the platform creates
// the ClusterProviderConfig, it becomes ready.
func (s *system) tailnetUnavailable(ctx context.Context, t *testing.T) {
	const ns, name, tailnet = "team-tn", "relay", "tailnet-later"
	s.namespaceWithKey(t, ns)
	s.applyPeerRelay(t, ns, name, "replicas: 1\nauthKeySecretRef: {name: tailscale-auth}\ntailnet: "+tailnet)
	harness.Eventually(t, 90*time.Second, "PeerRelayReady says the tailnet is unusable", func(context.Context) error {
		u, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
		if err != nil {
			return err
		}
		st, msg := condition(u, v1alpha1.ConditionPeerRelayReady)
		if st != "False" || !strings.HasPrefix(msg, string(v1alpha1.ReasonTailnetUnavailable)+": ") || !strings.Contains(msg, `ClusterProviderConfig `+tailnet) {
			return fmt.Errorf("PeerRelayReady %q %q", st, msg)
		}
		return nil
	})
	cpc := fmt.Sprintf(`{"apiVersion":%q,"kind":"ClusterProviderConfig","metadata":{"name":%q},"spec":{}}`, relayAPI, tailnet)
	if out, err := s.KubectlIn(t, []byte(cpc), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.waitReady(ctx, t, ns, name, 2*time.Minute)
	if out, err := s.Kubectl(t, "-n", ns, "delete", "peerrelay", name, "--timeout=2m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
