package relayconfig_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
)

// TestStateSecret: the provider creates the replica's empty state Secret,
// controlled by the RelayConfig; once containerboot writes a device ID
// there the config drops its auth key (a restarted pod logs in from its
// state, whatever became of the key); a state Secret deleted by hand is
// made again, and the config carries the key again, since the device must
// log in anew.
func TestStateSecret(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.service(t, "relay-0", corev1.LoadBalancerIngress{IP: "203.0.113.5"})
	e.relayConfig(t, "relay-0", func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.StateSecretName = "relay-0" })
	hasKey := func(c ipn.ConfigVAlpha) bool {
		return c.AuthKey != nil && *c.AuthKey == "file:/etc/tailscale/authkey/authkey"
	}
	e.config(t, "relay-0-config", "a config with the key's file", hasKey)

	state := &corev1.Secret{}
	harness.Eventually(t, 20*time.Second, "state Secret relay-0", func(context.Context) error {
		return e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "relay-0"}, state)
	})
	if !metav1.IsControlledBy(state, e.get(t, "relay-0")) {
		t.Fatalf("state Secret relay-0 is not controlled by its RelayConfig: %v", state.OwnerReferences)
	}

	state.Data = map[string][]byte{"device_id": []byte("n1")}
	must(t, e.c.Update(ctx, state))
	e.config(t, "relay-0-config", "a config without a key once the device exists", func(c ipn.ConfigVAlpha) bool { return c.AuthKey == nil })
	e.waitFor(t, "relay-0", "the device ID recorded", func(rc *v1alpha1.RelayConfig) bool { return rc.Status.AtProvider.DeviceID == "n1" })

	old := state.UID
	must(t, e.c.Delete(ctx, state))
	harness.Eventually(t, 20*time.Second, "state Secret relay-0 made again", func(context.Context) error {
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "relay-0"}, state); err != nil {
			return err
		}
		if state.UID == old {
			return errors.New("still the old Secret")
		}
		return nil
	})
	e.config(t, "relay-0-config", "the key back: the device must log in again", hasKey)
	e.waitFor(t, "relay-0", "the new state Secret's UID recorded", func(rc *v1alpha1.RelayConfig) bool { return rc.Status.AtProvider.StateSecretUID == string(state.UID) })
}
