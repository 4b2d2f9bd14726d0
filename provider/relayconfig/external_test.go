package relayconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tailnet"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
)

// The unit tier: the external client against controller-runtime's fake
// client (cluster_test.go), a fake DNS and a fake tailnet API. No binaries;
// the integration tier (package relayconfig_test, skipped under -short)
// runs the controller against a real API server.

const ns = "team-a"

// fakeDNS answers A lookups from a map; a missing name is a failure.
type fakeDNS map[string][]netip.Addr

func (d fakeDNS) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	a, ok := d[host]
	if !ok {
		return nil, errors.New("SERVFAIL")
	}
	return a, nil
}

// fakeAPI is the Tailscale API in memory.
type fakeAPI struct {
	minted  int
	revoked []string
	devices map[string]*tailnet.Device // what Device answers
	deleted []string
	gets    int
	err     error
}

func (f *fakeAPI) RevokeKey(_ context.Context, id string) error {
	f.revoked = append(f.revoked, id)
	return nil
}

func (f *fakeAPI) Device(_ context.Context, id string) (*tailnet.Device, error) {
	f.gets++
	if f.err != nil {
		return nil, f.err
	}
	return f.devices[id], nil
}

// events records the events the provider records.
type events []event.Event

func (e *events) Event(_ runtime.Object, ev event.Event) { *e = append(*e, ev) }

func (e *events) WithAnnotations(...string) event.Recorder { return e }

func (f *fakeAPI) CreateAuthKey(_ context.Context, _ tailnet.KeyRequest) (string, string, time.Time, error) {
	if f.err != nil {
		return "", "", time.Time{}, f.err
	}
	f.minted++
	return fmt.Sprintf("k%d", f.minted), fmt.Sprintf("tskey-auth-k%d-SECRET", f.minted), time.Now().Add(time.Hour), nil
}

func (f *fakeAPI) DeleteDevice(_ context.Context, id string) error {
	if f.err != nil {
		return f.err
	}
	f.deleted = append(f.deleted, id)
	return nil
}

func relayConfig(mutate ...func(*v1alpha1.RelayConfig)) *v1alpha1.RelayConfig {
	rc := &v1alpha1.RelayConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: ns, UID: "rc-uid"},
		Spec: v1alpha1.RelayConfigSpec{ForProvider: v1alpha1.RelayConfigParameters{
			ServiceRef:       &v1alpha1.LocalRef{Name: "r-0"},
			ConfigSecretName: "r-0-config",
			StateSecretName:  "r-0",
			Hostname:         "r-0",
			Port:             41641,
			AuthKeySecretRef: &v1alpha1.AuthKeyRef{Name: "ts-auth"},
		}},
	}
	for _, m := range mutate {
		m(rc)
	}
	return rc
}

func service(ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: ns}}
	svc.Status.LoadBalancer.Ingress = ingress
	return svc
}

// ownedSecret is a Secret controlled by rc.
func ownedSecret(rc *v1alpha1.RelayConfig, name string, data map[string][]byte) *corev1.Secret {
	ctrl := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.RelayConfigGroupVersionKind.GroupVersion().String(), Kind: v1alpha1.RelayConfigKind,
			Name: rc.Name, UID: rc.UID, Controller: &ctrl,
		}}},
		Data: data,
	}
}

// mintedKey is R-i-authkey as the provider writes it.
func mintedKey(rc *v1alpha1.RelayConfig, id string, expires time.Time) *corev1.Secret {
	s := ownedSecret(rc, "r-0-authkey", map[string][]byte{mintedDataKey(id): []byte("tskey-auth-" + id)})
	s.Annotations = map[string]string{annotationKeyID: id, annotationKeyExpires: expires.UTC().Format(time.RFC3339)}
	return s
}

// minted is the provider's own record of key id, minted at at.
func minted(id string, at time.Time) func(*v1alpha1.RelayConfig) {
	return func(rc *v1alpha1.RelayConfig) {
		rc.Status.AtProvider.AuthKeyID = id
		rc.Status.AtProvider.LastMinted = &metav1.Time{Time: at}
	}
}

// rendered is the config file for these endpoints and auth key.
func rendered(t *testing.T, authKey string, eps ...string) []byte {
	t.Helper()
	var aps []netip.AddrPort
	for _, e := range eps {
		aps = append(aps, netip.MustParseAddrPort(e))
	}
	b, _, err := tsconfig.Render(tsconfig.Relay{Hostname: "r-0", Port: 41641, Endpoints: aps, AuthKey: authKey})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const fileKey = "file:/etc/tailscale/authkey/authkey"

func TestObserve(t *testing.T) {
	type want struct {
		obs        managed.ExternalObservation
		err        string // a substring; "" for none
		endpoints  []string
		authKey    string // the rendered config's AuthKey; "" for none
		resolved   xpv2.ConditionReason
		deviceID   string
		keyReason  xpv2.ConditionReason
		keyMessage string // AuthKeyAvailable's message; "" for any
		mint       bool   // a key to mint before the config is written
		shrinking  bool   // status.atProvider.shrinkingSince set
	}
	rc := relayConfig()
	state := ownedSecret(rc, "r-0", nil)
	enrolled := ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-1")})
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-auth", Namespace: ns}, Data: map[string][]byte{"authkey": []byte("tskey-auth-FILE")}}
	cases := map[string]struct {
		reason string
		mg     *v1alpha1.RelayConfig
		objs   []client.Object
		dns    fakeDNS
		api    *fakeAPI
		// allowedTags: the provider config's spec.policy.tags.
		allowedTags []string
		want        want
	}{
		"NoConfigSecret": {
			reason: "A missing config Secret is reported as existing but not up to date, so Update writes it without Create's annotation writes.",
			mg:     relayConfig(),
			objs:   []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), state},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved},
		},
		"UpToDate": {
			reason: "A config Secret holding exactly the rendered config is up to date.",
			mg:     relayConfig(),
			objs: []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), state,
				ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: rendered(t, fileKey, "203.0.113.5:41641")})},
			want: want{obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, endpoints: []string{"203.0.113.5:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved},
		},
		"HandEdited": {
			reason: "A config Secret edited by hand is not up to date, so it is put right.",
			mg:     relayConfig(),
			objs: []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), state,
				ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: []byte(`{"Version":"alpha0"}`)})},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved},
		},
		"NotOurs": {
			reason: "A config Secret someone else controls is never taken over.",
			mg:     relayConfig(),
			objs: []client.Object{service(), state,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0-config", Namespace: ns}}},
			want: want{err: "not controlled by this RelayConfig", authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress},
		},
		"Hostname": {
			reason: "An ingress hostname is resolved to every A record, sorted.",
			mg:     relayConfig(),
			objs:   []client.Object{service(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), state},
			dns:    fakeDNS{"lb.example.com": {netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.1")}},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"198.51.100.1:41641", "198.51.100.2:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved},
		},
		"PartialAnswerKept": {
			reason: "The NLB's name answers one of its two addresses: both stay advertised for the grace, and status says since when, so a partial answer does not flap the config.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.Hostname = "lb.example.com"
				rc.Status.AtProvider.Endpoints = []string{"198.51.100.1:41641", "198.51.100.2:41641"}
			}),
			dns: fakeDNS{"lb.example.com": {netip.MustParseAddr("198.51.100.1")}},
			objs: []client.Object{service(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), state,
				ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: rendered(t, fileKey, "198.51.100.1:41641", "198.51.100.2:41641")})},
			want: want{obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, endpoints: []string{"198.51.100.1:41641", "198.51.100.2:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved, shrinking: true},
		},
		"PartialAnswerAfterGrace": {
			reason: "An address the answer has lacked for longer than the grace is gone: it is dropped.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.Hostname = "lb.example.com"
				rc.Status.AtProvider.Endpoints = []string{"198.51.100.1:41641", "198.51.100.2:41641"}
				rc.Status.AtProvider.ShrinkingSince = &metav1.Time{Time: time.Now().Add(-shrinkGrace - time.Second)}
			}),
			dns: fakeDNS{"lb.example.com": {netip.MustParseAddr("198.51.100.1")}},
			objs: []client.Object{service(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), state,
				ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: rendered(t, fileKey, "198.51.100.1:41641", "198.51.100.2:41641")})},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"198.51.100.1:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved},
		},
		"LookupFailsKeepsConfig": {
			reason: "A failed lookup keeps the endpoints the config advertises, in the config and in status, even when status lags behind the config; the failure is an error once the config is up to date.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.Endpoints = []string{"198.51.100.7:41641"} // one resolution behind
			}),
			objs: []client.Object{service(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), state,
				ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: rendered(t, fileKey, "198.51.100.1:41641", "198.51.100.9:41641")})},
			want: want{err: "SERVFAIL", endpoints: []string{"198.51.100.1:41641", "198.51.100.9:41641"}, authKey: fileKey, resolved: v1alpha1.ReasonResolveFailed},
		},
		"LookupFailsNoConfig": {
			reason: "A config Secret lost during an outage is written again from the endpoints status recorded.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.Endpoints = []string{"198.51.100.1:41641"}
			}),
			objs: []client.Object{service(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), state},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"198.51.100.1:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolveFailed},
		},
		"LookupFailsNewPort": {
			reason: "A port changed while the lookup fails: the last good addresses are advertised on the new port, not the old one, which the relay no longer listens on; static endpoints keep theirs.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Spec.ForProvider.Port = 7001
				rc.Spec.ForProvider.StaticEndpoints = []string{"192.0.2.1:9000"}
				rc.Status.AtProvider.Endpoints = []string{"192.0.2.1:9000", "198.51.100.1:41641"}
			}),
			objs: []client.Object{service(corev1.LoadBalancerIngress{Hostname: "lb.example.com"}), state},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"192.0.2.1:9000", "198.51.100.1:7001"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolveFailed},
		},
		"IngressGone": {
			reason: "A Service that lost its ingress keeps the last good endpoints and says it waits.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.Endpoints = []string{"203.0.113.5:41641"}
			}),
			objs: []client.Object{service(), state},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress},
		},
		"NoServiceYet": {
			reason: "Before its Service exists the replica still gets a config, advertising nothing.",
			mg:     relayConfig(),
			objs:   []client.Object{state},
			want:   want{obs: managed.ExternalObservation{ResourceExists: true}, authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress},
		},
		"StateMissing": {
			reason: "A missing state Secret is reported not up to date, so Update creates it.",
			mg:     relayConfig(),
			objs: []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}),
				ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: rendered(t, fileKey, "203.0.113.5:41641")})},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				authKey: fileKey, resolved: v1alpha1.ReasonResolved},
		},
		"Enrolled": {
			reason: "Once the state Secret holds a device ID, the device ID is recorded and the config carries no key.",
			mg:     relayConfig(),
			objs:   []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), enrolled},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				resolved: v1alpha1.ReasonResolved, deviceID: "dev-1", keyReason: v1alpha1.ReasonKeyLoggedIn},
		},
		"EnrolledKeepsAvailable": {
			reason: "A key condition that was fine is left as it is at login: one status write less, each a watch event on the PeerRelay.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				setKeyCondition(rc, corev1.ConditionTrue, v1alpha1.ReasonKeyAvailable, "the key in Secret ts-auth")
			}),
			objs: []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), enrolled},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				resolved: v1alpha1.ReasonResolved, deviceID: "dev-1", keyReason: v1alpha1.ReasonKeyAvailable},
		},
		"Mint": {
			reason: "With no auth key Secret named and API access, Observe only notes that a key must be minted: Update mints it.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }),
			objs:   []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), state},
			api:    &fakeAPI{},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				resolved: v1alpha1.ReasonResolved, keyReason: v1alpha1.ReasonKeyMinting, mint: true},
		},
		"MintTagsNotAllowed": {
			reason: "Tags the provider config's policy does not allow are never minted: the condition names them and the policy.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Spec.ForProvider.AuthKeySecretRef = nil
				rc.Spec.ForProvider.Tags = []string{"tag:relay", "tag:admin"}
			}),
			objs:        []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), state},
			api:         &fakeAPI{},
			allowedTags: []string{"tag:relay"},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, endpoints: []string{"203.0.113.5:41641"},
				resolved: v1alpha1.ReasonResolved, keyReason: v1alpha1.ReasonKeyUnavailable},
		},
		"MintedKeyReused": {
			reason: "An unexpired minted key is used again, not minted anew; the config names its file.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }, minted("k7", time.Now().Add(-time.Hour))),
			objs:   []client.Object{service(), state, mintedKey(rc, "k7", time.Now().Add(time.Minute))},
			api:    &fakeAPI{},
			want: want{obs: managed.ExternalObservation{ResourceExists: true},
				authKey: "file:/etc/tailscale/authkey/r-0/authkey-k7", resolved: v1alpha1.ReasonAwaitingAddress, keyReason: v1alpha1.ReasonKeyAvailable},
		},
		"MintedKeyExpired": {
			reason: "An expired, unused minted key is to be replaced.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }, minted("k7", time.Now().Add(-time.Hour))),
			objs:   []client.Object{service(), state, mintedKey(rc, "k7", time.Now().Add(-time.Minute))},
			api:    &fakeAPI{},
			want: want{obs: managed.ExternalObservation{ResourceExists: true},
				authKey: "file:/etc/tailscale/authkey/r-0/authkey-k7", resolved: v1alpha1.ReasonAwaitingAddress, keyReason: v1alpha1.ReasonKeyMinting, mint: true},
		},
		"ReissueMinted": {
			reason: "A device that lost its login asks for a new key in place of the minted one it has: a new key is minted, so the config's AuthKey changes, which is what containerboot waits for.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }, minted("k7", time.Now().Add(-time.Hour))),
			objs: []client.Object{service(), mintedKey(rc, "k7", time.Now().Add(time.Minute)),
				ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-1"), stateSecretReissueKey: []byte("file:/etc/tailscale/authkey/r-0/authkey-k7")})},
			api: &fakeAPI{},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, deviceID: "dev-1",
				authKey: "file:/etc/tailscale/authkey/r-0/authkey-k7", resolved: v1alpha1.ReasonAwaitingAddress, keyReason: v1alpha1.ReasonKeyRejected, mint: true},
		},
		"ReissueTooSoon": {
			reason: "A device asking again within 30 s of the last key minted for it gets none yet: an error, so the reconciler's backoff brings it back, and not a mint per reconcile.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }, minted("k7", time.Now().Add(-5*time.Second))),
			objs: []client.Object{service(), mintedKey(rc, "k7", time.Now().Add(time.Hour)),
				ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-1"), stateSecretReissueKey: []byte("file:/etc/tailscale/authkey/r-0/authkey-k7")})},
			api:  &fakeAPI{},
			want: want{err: "within 30 s of the last one minted", deviceID: "dev-1", keyReason: v1alpha1.ReasonKeyRejected},
		},
		"KeySecretDeletedTooSoon": {
			reason: "A minted key's Secret deleted within 30 s of the mint (by the provider's record, not the Secret's) gets no new key yet: deleting it in a loop mints one per 30 s at most.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }, minted("k7", time.Now().Add(-5*time.Second))),
			objs:   []client.Object{service(), state},
			api:    &fakeAPI{},
			want:   want{err: "within 30 s of the last one minted", keyReason: v1alpha1.ReasonKeyMinting},
		},
		"KeyIDNotFromAnnotation": {
			reason: "The key ID is the provider's record: a Secret whose annotation names another key (a tenant's edit) is not taken for it, and the recorded key, missing from the Secret, is replaced.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }, minted("k7", time.Now().Add(-time.Hour))),
			objs:   []client.Object{service(), state, mintedKey(rc, "k-other", time.Now().Add(time.Hour))},
			api:    &fakeAPI{},
			want: want{obs: managed.ExternalObservation{ResourceExists: true},
				authKey: "file:/etc/tailscale/authkey/r-0/authkey-k7", resolved: v1alpha1.ReasonAwaitingAddress, keyReason: v1alpha1.ReasonKeyMinting, mint: true},
		},
		"ReissueSupplied": {
			reason: "A device that lost its login gets the supplied key back in its config, and the condition says the key was refused.",
			mg:     relayConfig(),
			objs: []client.Object{service(), keySecret,
				ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-1"), stateSecretReissueKey: []byte("")})},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, deviceID: "dev-1",
				authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress, keyReason: v1alpha1.ReasonKeyRejected},
		},
		"NoKeyNoAPI": {
			reason: "With no auth key Secret and no API access, the config carries no key: the user logs the device in another way.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef = nil }),
			objs:   []client.Object{service(), state},
			want:   want{obs: managed.ExternalObservation{ResourceExists: true}, resolved: v1alpha1.ReasonAwaitingAddress, keyReason: v1alpha1.ReasonKeyUnavailable},
		},
		"Inline": {
			reason: "An Inline key is read from its Secret into the config.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Spec.ForProvider.AuthKeySecretRef.Mode = v1alpha1.AuthKeyModeInline
			}),
			objs: []client.Object{service(), state,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-auth", Namespace: ns}, Data: map[string][]byte{"authkey": []byte("tskey-auth-INLINE\n")}}},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, authKey: "tskey-auth-INLINE", resolved: v1alpha1.ReasonAwaitingAddress},
		},
		"InlineWrongKey": {
			reason: "An Inline key Secret without the named key is an error naming the field.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Spec.ForProvider.AuthKeySecretRef.Mode = v1alpha1.AuthKeyModeInline
			}),
			objs: []client.Object{service(), state,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-auth", Namespace: ns}, Data: map[string][]byte{"other": []byte("tskey-auth-INLINE")}}},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, resolved: v1alpha1.ReasonAwaitingAddress,
				keyReason: v1alpha1.ReasonKeySecretMissing, keyMessage: `Secret ts-auth named by spec.authKeySecretRef has no key "authkey": set spec.authKeySecretRef.key`},
		},
		"KeySecretMissing": {
			reason: "A key Secret that does not exist is named in AuthKeyAvailable (the PeerRelay's AuthKeySecretMissing); the config names its file, there once the Secret is.",
			mg:     relayConfig(),
			objs:   []client.Object{service(), state},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, resolved: v1alpha1.ReasonAwaitingAddress, authKey: fileKey,
				keyReason: v1alpha1.ReasonKeySecretMissing, keyMessage: `Secret ts-auth named by spec.authKeySecretRef does not exist: create it with a pre-authorised auth key under key "authkey"`},
		},
		"StateSecretNotOurs": {
			reason: "A device ID in a state Secret the RelayConfig does not control (a tenant wrote it, or it is another replica's) is not recorded.",
			mg:     relayConfig(),
			objs: []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: ns}, Data: map[string][]byte{stateSecretDeviceIDKey: []byte("dev-9")}}},
			want: want{err: "spec.forProvider.stateSecretName", endpoints: []string{"203.0.113.5:41641"}, resolved: v1alpha1.ReasonResolved},
		},
		"StateSecretForged": {
			reason: "A Secret under the state Secret's name with a controller reference to the RelayConfig, but not the one the provider created (its UID is recorded), is not read for a device ID: a tenant can write any owner reference.",
			mg:     relayConfig(func(rc *v1alpha1.RelayConfig) { rc.Status.AtProvider.StateSecretUID = "created-by-provider" }),
			objs: []client.Object{service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}), func() client.Object {
				s := ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-9")})
				s.UID = "forged"
				return s
			}()},
			want: want{err: "spec.forProvider.stateSecretName", endpoints: []string{"203.0.113.5:41641"}, resolved: v1alpha1.ReasonResolved},
		},
		"DeletingRecordsNoDevice": {
			reason: "A device ID written into the state Secret once the RelayConfig is being deleted is not recorded: Delete acts on the one recorded while it lived.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				now := metav1.Now()
				rc.SetDeletionTimestamp(&now)
				rc.Status.AtProvider.DeviceID = "dev-1"
			}),
			objs: []client.Object{service(), ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-9")})},
			api:  &fakeAPI{devices: map[string]*tailnet.Device{"dev-1": {ID: "dev-1", Hostname: "r-0", Tags: []string{"tag:relay"}}, "dev-9": {ID: "dev-9", Hostname: "r-0", Tags: []string{"tag:relay"}}}},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress, deviceID: "dev-1"},
		},
		"DeletingWithDevice": {
			reason: "A RelayConfig being deleted whose Secrets went first (its namespace is deleted) still has its recorded device to delete: Delete must run.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				now := metav1.Now()
				rc.SetDeletionTimestamp(&now)
				rc.Status.AtProvider.DeviceID = "dev-1"
			}),
			objs: []client.Object{service()},
			api:  &fakeAPI{devices: map[string]*tailnet.Device{"dev-1": {ID: "dev-1", Hostname: "r-0", Tags: []string{"tag:relay"}}}},
			want: want{obs: managed.ExternalObservation{ResourceExists: true}, authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress, deviceID: "dev-1"},
		},
		"DeletingDeviceGone": {
			reason: "Once the tailnet no longer has the recorded device, nothing is left to delete: the finalizer goes.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				now := metav1.Now()
				rc.SetDeletionTimestamp(&now)
				rc.Status.AtProvider.DeviceID = "dev-1"
			}),
			objs: []client.Object{service()},
			api:  &fakeAPI{},
			want: want{obs: managed.ExternalObservation{ResourceExists: false}, authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress, deviceID: "dev-1"},
		},
		"Deleting": {
			reason: "A RelayConfig being deleted whose config Secret is gone has nothing left to delete.",
			mg: relayConfig(func(rc *v1alpha1.RelayConfig) {
				now := metav1.Now()
				rc.SetDeletionTimestamp(&now)
			}),
			objs: []client.Object{service(), state},
			want: want{obs: managed.ExternalObservation{ResourceExists: false}, authKey: fileKey, resolved: v1alpha1.ReasonAwaitingAddress},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCluster(tc.objs...)
			kube := c
			e := &external{kube: kube, read: kube, resolver: &resolve.Resolver{DNS: tc.dns}, allowedTags: tc.allowedTags}
			if tc.api != nil {
				e.api = tc.api
			}
			obs, err := e.Observe(t.Context(), tc.mg)
			if len(c.writes) > 0 {
				t.Errorf("%s\nObserve wrote %v: it must only observe (an Observe-only management policy writes nothing)", tc.reason, c.writes)
			}
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nObserve error: %v, want one containing %q", tc.reason, err, tc.want.err)
				}
				if strings.Contains(err.Error(), "tskey-") {
					t.Errorf("%s\nan auth key reached the error: %v", tc.reason, err)
				}
				if len(e.obs.rendered) == 0 {
					return
				}
			} else if err != nil {
				t.Fatalf("%s\nObserve: %v", tc.reason, err)
			} else if diff := cmp.Diff(tc.want.obs, obs); diff != "" {
				t.Errorf("%s\nObservation (-want +got):\n%s", tc.reason, diff)
			}
			var cfg ipn.ConfigVAlpha
			if err := json.Unmarshal(e.obs.rendered, &cfg); err != nil {
				t.Fatalf("rendered config: %v", err)
			}
			if diff := cmp.Diff(tc.want.endpoints, endpoint.Strings(cfg.RelayServerStaticEndpoints), cmpEmpty); diff != "" {
				t.Errorf("%s\nadvertised endpoints (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.endpoints, tc.mg.Status.AtProvider.Endpoints, cmpEmpty); diff != "" {
				t.Errorf("%s\nstatus.atProvider.endpoints (-want +got):\n%s", tc.reason, diff)
			}
			if got := ptrOr(cfg.AuthKey); got != tc.want.authKey {
				t.Errorf("%s\nconfig AuthKey: %q, want %q", tc.reason, got, tc.want.authKey)
			}
			if got := tc.mg.GetCondition(v1alpha1.ConditionResolved).Reason; got != tc.want.resolved {
				t.Errorf("%s\nEndpointsResolved reason: %q, want %q", tc.reason, got, tc.want.resolved)
			}
			if got := tc.mg.Status.AtProvider.DeviceID; got != tc.want.deviceID {
				t.Errorf("%s\ndevice ID: %q, want %q", tc.reason, got, tc.want.deviceID)
			}
			if got := tc.mg.Status.AtProvider.ShrinkingSince != nil; got != tc.want.shrinking {
				t.Errorf("%s\nshrinkingSince set: %v, want %v", tc.reason, got, tc.want.shrinking)
			}
			if e.obs.mintKey != tc.want.mint {
				t.Errorf("%s\nkey to mint: %v, want %v", tc.reason, e.obs.mintKey, tc.want.mint)
			}
			if tc.api != nil && tc.api.minted != 0 {
				t.Errorf("%s\nObserve minted %d keys: Observe must only observe", tc.reason, tc.api.minted)
			}
			if tc.want.keyReason != "" {
				if got := tc.mg.GetCondition(v1alpha1.ConditionAuthKey).Reason; got != tc.want.keyReason {
					t.Errorf("%s\n%s reason %q, want %q", tc.reason, v1alpha1.ConditionAuthKey, got, tc.want.keyReason)
				}
			}
			if got := tc.mg.GetCondition(v1alpha1.ConditionAuthKey).Message; tc.want.keyMessage != "" && got != tc.want.keyMessage {
				t.Errorf("%s\n%s message %q, want %q", tc.reason, v1alpha1.ConditionAuthKey, got, tc.want.keyMessage)
			}
		})
	}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Transformer("empty", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestWrites: what Update, Create and Delete write, in order.
func TestWrites(t *testing.T) {
	rc := relayConfig()
	config := ownedSecret(rc, "r-0-config", map[string][]byte{tsconfig.FileName: []byte("old")})
	cases := map[string]struct {
		reason       string
		objs         []client.Object
		stateMissing bool
		mintKey      bool
		wantConfig   string // the written config's AuthKey, when the test checks it
		api          *fakeAPI
		deviceID     string
		keyID        string // the provider's record of the last key minted
		fail         map[string]error
		call         func(*external, *v1alpha1.RelayConfig) error
		wantErr      string
		wantWrites   []string
		wantDeleted  []string
		wantEvent    string // a substring of the one Warning event; "" for none
		wantRevoked  []string
		deleting     bool          // the RelayConfig is being deleted
		deletedAgo   time.Duration // and was, that long ago
		allowedTags  []string
		uncached     []client.Object // seen only past the cache
		wantMinted   int
		staleDevice  string
		// budgetSpent spends the namespace's mint budget first.
		budgetSpent bool
	}{
		"UpdateCreates": {
			reason:       "Update creates a missing config Secret, and the state Secret first when it is missing too.",
			stateMissing: true,
			call:         update,
			wantWrites:   []string{"create Secret/r-0", "create Secret/r-0-config"},
		},
		"UpdateRewrites": {
			reason:     "Update rewrites an existing config Secret's data.",
			objs:       []client.Object{config},
			call:       update,
			wantWrites: []string{"update Secret/r-0-config"},
		},
		"CreateWrites": {
			reason:     "Create writes the config Secret.",
			call:       create,
			wantWrites: []string{"create Secret/r-0-config"},
		},
		"UpdateRefusesForeign": {
			reason:  "A config Secret someone else wrote is never taken over, even if Observe's check were skipped.",
			objs:    []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0-config", Namespace: ns}}},
			call:    update,
			wantErr: "the Secret r-0-config exists and is not controlled by this RelayConfig: choose another spec.forProvider.configSecretName",
		},
		"MintRefusesForeign": {
			reason:  "A Secret under the minted key's name that the RelayConfig does not control is not overwritten, and no key is minted for it.",
			objs:    []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0-authkey", Namespace: ns, Labels: map[string]string{LabelManagedBy: ManagedBy}}}},
			mintKey: true,
			api:     &fakeAPI{},
			call:    update,
			wantErr: "the Secret r-0-authkey exists and is not controlled by this RelayConfig",
		},
		"ReissueDeletesStaleDevice": {
			reason:      "A reissue first removes the device that lost its login (the tailnet says it is the replica's), as the Tailscale operator does: the new login makes a new device.",
			objs:        []client.Object{config},
			mintKey:     true,
			staleDevice: "dev-1",
			api:         &fakeAPI{devices: map[string]*tailnet.Device{"dev-1": {ID: "dev-1", Hostname: "r-0", Tags: []string{"tag:relay"}}}},
			call:        update,
			wantWrites:  []string{"create Secret/r-0-authkey", "patch status RelayConfig/r-0", "update Secret/r-0-config"},
			wantDeleted: []string{"dev-1"},
			wantMinted:  1,
			wantConfig:  "file:/etc/tailscale/authkey/r-0/authkey-k1",
		},
		"ReissueKeepsForeignDevice": {
			reason:      "A stale device ID that is not the replica's (a tenant wrote another's) is left, with a Warning; the key is minted all the same.",
			objs:        []client.Object{config},
			mintKey:     true,
			staleDevice: "dev-9",
			api:         &fakeAPI{devices: map[string]*tailnet.Device{"dev-9": {ID: "dev-9", Hostname: "alice-laptop"}}},
			call:        update,
			wantWrites:  []string{"create Secret/r-0-authkey", "patch status RelayConfig/r-0", "update Secret/r-0-config"},
			wantEvent:   "device dev-9 recorded in state Secret r-0 was not deleted",
			wantMinted:  1,
			wantConfig:  "file:/etc/tailscale/authkey/r-0/authkey-k1",
		},
		"MintRevokesReplaced": {
			reason:      "A new key revokes the one it replaces, by the provider's record: a tenant deleting its key Secret again and again is not left with a pile of usable keys.",
			objs:        []client.Object{config},
			mintKey:     true,
			keyID:       "k0",
			wantConfig:  "file:/etc/tailscale/authkey/r-0/authkey-k1",
			api:         &fakeAPI{},
			call:        update,
			wantWrites:  []string{"create Secret/r-0-authkey", "patch status RelayConfig/r-0", "update Secret/r-0-config"},
			wantRevoked: []string{"k0"},
			wantMinted:  1,
		},
		"MintBudgetSpent": {
			reason:      "A mint past the namespace's budget asks the Tailscale API for nothing, writes nothing, and names the budget.",
			objs:        []client.Object{config},
			mintKey:     true,
			budgetSpent: true,
			api:         &fakeAPI{},
			call:        update,
			wantErr:     "namespace " + ns + " has spent its budget of minted keys",
		},
		"MintRecordFails": {
			reason:      "A minted key the provider cannot record in its own status is revoked: a key it cannot account for would escape the throttle and the revocation of replaced keys.",
			fail:        map[string]error{"patch status RelayConfig/r-0": errors.New("etcdserver: request timed out")},
			mintKey:     true,
			api:         &fakeAPI{},
			call:        update,
			wantErr:     "cannot record minted key k1 in status.atProvider",
			wantWrites:  []string{"create Secret/r-0-authkey"},
			wantRevoked: []string{"k1"},
			wantMinted:  1,
		},
		"MintWriteFails": {
			reason:      "A minted key whose Secret cannot be written is revoked: the retry mints another, and no usable key is left in the tailnet.",
			fail:        map[string]error{"create Secret/r-0-authkey": errors.New("etcdserver: request timed out")},
			mintKey:     true,
			api:         &fakeAPI{},
			call:        update,
			wantErr:     "the key minted for it, k1, is revoked",
			wantRevoked: []string{"k1"},
			wantMinted:  1,
		},
		"UpdateRefusesUncachedForeign": {
			reason:   "A config Secret someone else wrote carries none of the provider's labels, so the cache does not hold it: the refused create is read past the cache and named as foreign.",
			uncached: []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0-config", Namespace: ns}}},
			fail:     map[string]error{"create Secret/r-0-config": kerrors.NewAlreadyExists(corev1.Resource("secrets"), "r-0-config")},
			call:     update,
			wantErr:  "the Secret r-0-config exists and is not controlled by this RelayConfig: choose another spec.forProvider.configSecretName",
		},
		"MintRefusesUncachedForeign": {
			reason:   "A Secret under the minted key's name that only an uncached read sees is refused before a key is minted.",
			uncached: []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0-authkey", Namespace: ns}}},
			mintKey:  true,
			api:      &fakeAPI{},
			call:     update,
			wantErr:  "the Secret r-0-authkey exists and is not controlled by this RelayConfig",
		},
		"StateSecretForeign": {
			reason:       "A state Secret under the name the RelayConfig gives that is another's (a tenant's, another replica's) is not used: the pod must not log in with another's state.",
			objs:         []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: ns}, Data: map[string][]byte{stateSecretDeviceIDKey: []byte("dev-9")}}},
			stateMissing: true,
			call:         update,
			wantErr:      "the Secret r-0 exists and is not controlled by this RelayConfig: choose another spec.forProvider.stateSecretName",
		},
		"UpdateMints": {
			reason:     "Update mints the key Observe found missing, then writes a config naming its file.",
			mintKey:    true,
			api:        &fakeAPI{},
			call:       update,
			wantWrites: []string{"create Secret/r-0-authkey", "patch status RelayConfig/r-0", "create Secret/r-0-config"},
			wantConfig: "file:/etc/tailscale/authkey/r-0/authkey-k1",
			wantMinted: 1,
		},
		"UpdateMintReplaces": {
			reason:     "A new key replaces the old one in R-i-authkey.",
			objs:       []client.Object{config, mintedKey(rc, "k7", time.Now())},
			mintKey:    true,
			api:        &fakeAPI{},
			call:       update,
			wantWrites: []string{"update Secret/r-0-authkey", "patch status RelayConfig/r-0", "update Secret/r-0-config"},
			wantConfig: "file:/etc/tailscale/authkey/r-0/authkey-k1",
			wantMinted: 1,
		},
		"MintFails": {
			reason:  "A failed mint writes nothing, and no key reaches the error.",
			mintKey: true,
			api:     &fakeAPI{err: errors.New("403 forbidden")},
			call:    update,
			wantErr: "403 forbidden",
		},
		"CreateFails": {
			reason:  "A refused create is an error naming the Secret.",
			fail:    map[string]error{"create Secret/r-0-config": errors.New("forbidden")},
			call:    create,
			wantErr: "cannot write config Secret r-0-config: forbidden",
		},
		"DeleteWithAPI": {
			reason:      "Delete removes the recorded device through the API once the tailnet says it is the replica's, then the config Secret.",
			objs:        []client.Object{config},
			api:         &fakeAPI{devices: map[string]*tailnet.Device{"dev-1": {ID: "dev-1", Hostname: "r-0", Tags: []string{"tag:relay"}}}},
			deviceID:    "dev-1",
			call:        del,
			wantWrites:  []string{"delete Secret/r-0-config"},
			wantDeleted: []string{"dev-1"},
		},
		"DeleteNotTheReplicasDevice": {
			reason:     "A device ID a tenant wrote into the state Secret (a colleague's laptop) is not deleted: the tailnet says its hostname is another's. A Warning names it, and the replica goes.",
			objs:       []client.Object{config},
			api:        &fakeAPI{devices: map[string]*tailnet.Device{"dev-9": {ID: "dev-9", Hostname: "alice-laptop"}}},
			deviceID:   "dev-9",
			call:       del,
			wantWrites: []string{"delete Secret/r-0-config"},
			wantEvent:  `device dev-9 recorded in state Secret r-0 was not deleted: its hostname is not this replica's "r-0"`,
		},
		"DeleteUntaggedDevice": {
			reason:     "A person's device (untagged) under the replica's hostname, which the tenant chose, is not deleted.",
			objs:       []client.Object{config},
			api:        &fakeAPI{devices: map[string]*tailnet.Device{"dev-9": {ID: "dev-9", Hostname: "r-0"}}},
			deviceID:   "dev-9",
			call:       del,
			wantWrites: []string{"delete Secret/r-0-config"},
			wantEvent:  "device dev-9 recorded in state Secret r-0 was not deleted: it carries no tags",
		},
		"DeleteTagsOutsidePolicy": {
			reason:      "With a key the tenant supplies, a device whose tags the provider config's policy does not give this tenant (another team's relay) is not deleted.",
			objs:        []client.Object{config},
			api:         &fakeAPI{devices: map[string]*tailnet.Device{"dev-9": {ID: "dev-9", Hostname: "r-0", Tags: []string{"tag:team-b"}}}},
			allowedTags: []string{"tag:team-a"},
			deviceID:    "dev-9",
			call:        del,
			wantWrites:  []string{"delete Secret/r-0-config"},
			wantEvent:   "device dev-9 recorded in state Secret r-0 was not deleted: its tags are not all among those the provider config's policy allows [tag:team-a]",
		},
		"DeleteDeviceGone": {
			reason:     "A device the tailnet no longer has is not deleted again.",
			objs:       []client.Object{config},
			api:        &fakeAPI{},
			deviceID:   "dev-1",
			call:       del,
			wantWrites: []string{"delete Secret/r-0-config"},
		},
		"DeleteAPIFails": {
			reason:   "An API error keeps everything, so the finalizer stays and Delete is retried.",
			objs:     []client.Object{config},
			api:      &fakeAPI{err: errors.New("500")},
			deviceID: "dev-1",
			call:     del,
			wantErr:  "500",
		},
		"DeleteRefusedGivesUp": {
			reason:     "A tailnet that has refused the OAuth client (403) for the whole grace since the deletion no longer holds the replica: the device is named in a Warning, and the replica goes.",
			objs:       []client.Object{config},
			api:        &fakeAPI{err: tsapi.APIError{Status: http.StatusForbidden, Message: "forbidden"}},
			deviceID:   "dev-1",
			deletedAgo: credentialsGrace + time.Minute,
			call:       del,
			wantWrites: []string{"delete Secret/r-0-config"},
			wantEvent:  "device dev-1 stays in the tailnet: remove it in the admin console; after 5m0s the tailnet still refuses the provider config's OAuth client: forbidden (403)",
		},
		"DeleteRefusedWithinGrace": {
			reason:     "Within the grace a 403 is retried: the OAuth client may be mended.",
			objs:       []client.Object{config},
			api:        &fakeAPI{err: tsapi.APIError{Status: http.StatusForbidden, Message: "forbidden"}},
			deviceID:   "dev-1",
			deletedAgo: time.Minute,
			call:       del,
			wantErr:    "forbidden (403)",
		},
		"DeleteWithoutAPI": {
			reason:     "Without API access Delete removes the config Secret only.",
			objs:       []client.Object{config},
			deviceID:   "dev-1",
			call:       del,
			wantWrites: []string{"delete Secret/r-0-config"},
		},
		"DeleteIgnoresForeignStateSecret": {
			reason:      "A state Secret someone else controls neither holds the deletion up nor names a device to delete: the device recorded before is the one checked and deleted.",
			objs:        []client.Object{config, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: ns}, Data: map[string][]byte{stateSecretDeviceIDKey: []byte("dev-9")}}},
			api:         &fakeAPI{devices: map[string]*tailnet.Device{"dev-1": {ID: "dev-1", Hostname: "r-0", Tags: []string{"tag:relay"}}, "dev-9": {ID: "dev-9", Hostname: "r-0", Tags: []string{"tag:relay"}}}},
			deviceID:    "dev-1",
			deleting:    true,
			call:        del,
			wantWrites:  []string{"delete Secret/r-0-config"},
			wantDeleted: []string{"dev-1"},
		},
		"DeleteOnlyTheRecordedDevice": {
			reason:     "Delete removes only the device recorded while the RelayConfig lived and was admitted, not one the tenant wrote into its own state Secret since (another team's relay, newer than the RelayConfig, under the same hostname and tags).",
			objs:       []client.Object{config, ownedSecret(rc, "r-0", map[string][]byte{stateSecretDeviceIDKey: []byte("dev-9")})},
			api:        &fakeAPI{devices: map[string]*tailnet.Device{"dev-9": {ID: "dev-9", Hostname: "r-0", Tags: []string{"tag:relay"}, Created: time.Now()}}},
			deleting:   true,
			call:       del,
			wantWrites: []string{"delete Secret/r-0-config"},
		},
		"DeleteRevokesMintedKey": {
			reason:      "A replica that goes revokes the key minted for it, by the provider's record: deleting and recreating PeerRelays leaves no usable keys behind.",
			objs:        []client.Object{config},
			api:         &fakeAPI{},
			keyID:       "k7",
			deleting:    true,
			call:        del,
			wantWrites:  []string{"delete Secret/r-0-config"},
			wantRevoked: []string{"k7"},
		},
		"DeleteLeavesForeignSecret": {
			reason: "A Secret under the config Secret's name that the RelayConfig does not control is left alone.",
			objs:   []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-0-config", Namespace: ns}}},
			call:   del,
		},
		"DeleteGone": {
			reason: "A config Secret already gone is no error.",
			call:   del,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.DeviceID = tc.deviceID
				rc.Status.AtProvider.AuthKeyID = tc.keyID
				if tc.deleting || tc.deletedAgo > 0 {
					at := metav1.NewTime(time.Now().Add(-tc.deletedAgo))
					rc.SetDeletionTimestamp(&at)
					rc.SetFinalizers([]string{"test"})
				}
			})
			c := newCluster(append([]client.Object{mg.DeepCopy()}, tc.objs...)...)
			// Recorded by this reconcile, not yet written: nothing the
			// provider writes on the way may lose it.
			mg.Status.AtProvider.StateSecretUID = "recorded-in-memory"
			for k, v := range tc.fail {
				c.fail[k] = v
			}
			kube := c
			var recorded events
			var read client.Reader = kube
			if tc.uncached != nil {
				read = newCluster(tc.uncached...)
			}
			e := &external{kube: kube, read: read, resolver: &resolve.Resolver{}, record: &recorded, allowedTags: tc.allowedTags,
				obs: observation{rendered: []byte("new"), stateMissing: tc.stateMissing, mintKey: tc.mintKey, staleDevice: tc.staleDevice}}
			if tc.api != nil {
				e.api = tc.api
			}
			if tc.budgetSpent {
				e.budgets = newMintBudgets()
				for e.budgets.spend(mg) == nil {
				}
			}
			err := tc.call(e, mg)
			if c := mg.GetCondition(v1alpha1.ConditionAuthKey); tc.budgetSpent && c.Reason != v1alpha1.ReasonMintBudgetSpent {
				t.Errorf("%s\nkey condition %s: %s, want reason %s", tc.reason, c.Reason, c.Message, v1alpha1.ReasonMintBudgetSpent)
			}
			if got := mg.Status.AtProvider.StateSecretUID; got != "recorded-in-memory" && !tc.stateMissing {
				t.Errorf("%s\nthe in-memory status lost what this reconcile recorded: stateSecretUID %q", tc.reason, got)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nerror: %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.wantWrites, c.writes, cmpEmpty); diff != "" {
				t.Errorf("%s\nwrites (-want +got):\n%s", tc.reason, diff)
			}
			switch {
			case tc.wantEvent == "" && len(recorded) > 0:
				t.Errorf("%s\nevents %v, want none", tc.reason, recorded)
			case tc.wantEvent != "" && (len(recorded) != 1 || recorded[0].Type != event.TypeWarning || !strings.Contains(recorded[0].Message, tc.wantEvent)):
				t.Errorf("%s\nevents %v, want one Warning containing %q", tc.reason, recorded, tc.wantEvent)
			}
			// What the tailnet says of a device the tenant named (another's
			// hostname, tags) never reaches the tenant's events.
			for _, ev := range recorded {
				if strings.Contains(ev.Message, "alice-laptop") || strings.Contains(ev.Message, "tag:team-b") {
					t.Errorf("%s\nan event tells the tenant another device's details: %q", tc.reason, ev.Message)
				}
			}
			if tc.api != nil {
				if diff := cmp.Diff(tc.wantDeleted, tc.api.deleted, cmpEmpty); diff != "" {
					t.Errorf("%s\ndevices deleted (-want +got):\n%s", tc.reason, diff)
				}
				if tc.api.minted != tc.wantMinted {
					t.Errorf("%s\nkeys minted: %d, want %d", tc.reason, tc.api.minted, tc.wantMinted)
				}
				if diff := cmp.Diff(tc.wantRevoked, tc.api.revoked, cmpEmpty); diff != "" {
					t.Errorf("%s\nkeys revoked (-want +got):\n%s", tc.reason, diff)
				}
			}
			if tc.wantConfig != "" {
				var cfg ipn.ConfigVAlpha
				if err := json.Unmarshal(c.secret(t, "r-0-config").Data[tsconfig.FileName], &cfg); err != nil || ptrOr(cfg.AuthKey) != tc.wantConfig {
					t.Errorf("%s\nwritten config's AuthKey: %v (%v), want %q", tc.reason, ptrOr(cfg.AuthKey), err, tc.wantConfig)
				}
				return
			}
			if s := c.secret(t, "r-0-config"); s != nil && tc.wantErr == "" && len(tc.wantWrites) > 0 && !strings.HasPrefix(tc.wantWrites[len(tc.wantWrites)-1], "delete") {
				if string(s.Data[tsconfig.FileName]) != "new" || !metav1.IsControlledBy(s, mg) {
					t.Errorf("%s\nconfig Secret: data %q, controlled by the RelayConfig: %v", tc.reason, s.Data, metav1.IsControlledBy(s, mg))
				}
			}
		})
	}
}

func update(e *external, mg *v1alpha1.RelayConfig) error {
	_, err := e.Update(context.Background(), mg)
	return err
}

func create(e *external, mg *v1alpha1.RelayConfig) error {
	_, err := e.Create(context.Background(), mg)
	return err
}

func del(e *external, mg *v1alpha1.RelayConfig) error {
	_, err := e.Delete(context.Background(), mg)
	return err
}

func TestCheckPlacement(t *testing.T) {
	checked := func() *v1alpha1.AWSPlacementObservation {
		return &v1alpha1.AWSPlacementObservation{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a", Checked: true, Zone: "eu-west-1a"}
	}
	recorded := checked()
	recorded.LastValid = &v1alpha1.AWSPlacement{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a"}
	cases := map[string]struct {
		reason string
		aws    *v1alpha1.AWSResolution
		prev   *v1alpha1.AWSPlacementObservation
		want   *v1alpha1.AWSPlacementObservation
		cond   xpv2.ConditionReason
	}{
		"NoPlacement": {
			reason: "Without a pinned subnet or allocation there is nothing to check, and nothing is recorded.",
			prev:   checked(),
		},
		"CheckedBefore": {
			reason: "A valid placement is checked once: the same subnet and allocation are not asked about again; one checked before the record existed becomes the last valid one.",
			aws:    &v1alpha1.AWSResolution{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a"},
			prev:   checked(),
			want:   recorded,
		},
		"AllocationPending": {
			reason: "A subnet alone (a new Elastic IP not yet allocated) is no placement to keep a Service on: the last full one stays the record.",
			aws:    &v1alpha1.AWSResolution{SubnetID: "subnet-0c"},
			prev:   recorded,
			want: &v1alpha1.AWSPlacementObservation{SubnetID: "subnet-0c",
				Message:   "not checked: the provider config has no AWS credentials (spec.aws.source)",
				LastValid: &v1alpha1.AWSPlacement{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a"}},
			cond: v1alpha1.ReasonNotChecked,
		},
		"NoCredentials": {
			reason: "Without AWS credentials the placement is recorded unchecked, and the condition says why; nothing is against it, so it is the last valid one.",
			aws:    &v1alpha1.AWSResolution{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b"},
			prev:   checked(),
			want: &v1alpha1.AWSPlacementObservation{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b",
				Message:   "not checked: the provider config has no AWS credentials (spec.aws.source)",
				LastValid: &v1alpha1.AWSPlacement{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b"}},
			cond: v1alpha1.ReasonNotChecked,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Spec.ForProvider.AWS = tc.aws
				rc.Status.AtProvider.AWS = tc.prev
			})
			e := &external{resolver: &resolve.Resolver{}}
			if err := e.checkPlacement(t.Context(), mg); err != nil {
				t.Errorf("%s\nno AWS call was made, yet: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, mg.Status.AtProvider.AWS); diff != "" {
				t.Errorf("%s\nstatus.atProvider.aws (-want +got):\n%s", tc.reason, diff)
			}
			if got := mg.GetCondition(v1alpha1.ConditionAWSPlacement).Reason; got != tc.cond {
				t.Errorf("%s\n%s reason %q, want %q", tc.reason, v1alpha1.ConditionAWSPlacement, got, tc.cond)
			}
		})
	}
}
