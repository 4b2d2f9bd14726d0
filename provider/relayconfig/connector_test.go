package relayconfig

import (
	stdcmp "cmp"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// TestConnectTracksUsage: Connect records the provider config usage of a
// live RelayConfig, and skips it for one being deleted, where a terminating
// namespace refuses the usage and a failing Connect would keep the
// finalizer for ever.
func TestConnectTracksUsage(t *testing.T) {
	errTerminating := errors.New(`unable to create new content in namespace team-a because it is being terminated`)
	cases := map[string]struct {
		reason    string
		deleting  bool
		wantErr   bool
		wantTrack bool
	}{
		"Live": {
			reason:    "A live RelayConfig's usage is tracked, and a refusal fails Connect.",
			wantErr:   true,
			wantTrack: true,
		},
		"Deleting": {
			reason:   "A RelayConfig being deleted connects without tracking, so Delete runs and the finalizer goes.",
			deleting: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Any usage written is refused, as in a terminating namespace.
			kube := newCluster(&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
			kube.fail["create ProviderConfigUsage/uid"] = errTerminating
			c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{})}
			mg := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: "team-a", UID: "uid"}}
			mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "default"})
			if tc.deleting {
				now := metav1.Now()
				mg.SetDeletionTimestamp(&now)
			}
			_, err := c.Connect(t.Context(), mg)
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nConnect error: %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if tracked := errors.Is(err, errTerminating); tracked != tc.wantTrack {
				t.Errorf("%s\ntracked: %v, want %v", tc.reason, tracked, tc.wantTrack)
			}
		})
	}
}

// TestConnectProviderConfigCondition: Connect says on the RelayConfig
// whether it could read its provider config. The function reads this
// condition, not Synced's message, to tell an unusable tailnet.
func TestConnectProviderConfigCondition(t *testing.T) {
	cases := map[string]struct {
		reason string
		found  bool
		policy *v1alpha1.Policy
		want   xpv2.Condition
	}{
		"Readable": {
			reason: "A provider config that exists is usable.",
			found:  true,
			want:   xpv2.Condition{Type: v1alpha1.ConditionProviderConfig, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonProviderConfigUsable},
		},
		"Denied": {
			reason: "A ClusterProviderConfig whose policy leaves the namespace out is not usable from there, and the message names the policy.",
			found:  true,
			policy: &v1alpha1.Policy{Namespaces: []string{"team-b"}},
			want: xpv2.Condition{Type: v1alpha1.ConditionProviderConfig, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonPolicyDenied,
				Message: "ClusterProviderConfig tailnet-b may not be used from namespace team-a: its spec.policy.namespaces allows [team-b]"},
		},
		"Missing": {
			reason: "A ClusterProviderConfig that does not exist is unreadable, and the message says which.",
			want: xpv2.Condition{Type: v1alpha1.ConditionProviderConfig, Status: corev1.ConditionFalse, Reason: v1alpha1.ReasonProviderConfigUnreadable,
				Message: `cannot get ClusterProviderConfig tailnet-b named by spec.providerConfigRef: clusterproviderconfigs.relay.peerrelay.io "tailnet-b" not found`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := newCluster()
			if tc.found {
				kube = newCluster(&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tailnet-b"}, Spec: v1alpha1.ProviderConfigSpec{Policy: tc.policy}})
			}
			c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{})}
			mg := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: "team-a", UID: "uid"}}
			mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "tailnet-b"})
			_, err := c.Connect(t.Context(), mg)
			if (err != nil) == (tc.found && tc.policy == nil) {
				t.Errorf("%s\nConnect error: %v", tc.reason, err)
			}
			got := mg.GetCondition(v1alpha1.ConditionProviderConfig)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s\n%s (-want +got):\n%s", tc.reason, v1alpha1.ConditionProviderConfig, diff)
			}
		})
	}
}

// TestConnect: what Connect builds from each kind of provider config, and
// the errors that name what is wrong.
func TestConnect(t *testing.T) {
	pc := func(spec v1alpha1.ProviderConfigSpec) *v1alpha1.ClusterProviderConfig {
		return &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: spec}
	}
	oauth := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-oauth", Namespace: "crossplane-system"},
		Data: map[string][]byte{v1alpha1.OAuthClientIDKey: []byte("id"), v1alpha1.OAuthClientSecretKey: []byte("secret")}}
	awsCreds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws", Namespace: "crossplane-system"},
		Data: map[string][]byte{v1alpha1.AWSAccessKeyIDKey: []byte("AKIA"), v1alpha1.AWSSecretAccessKeyKey: []byte("s")}}
	tailscale := &v1alpha1.TailscaleAPI{OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth", Namespace: "crossplane-system"}}
	team := func(spec v1alpha1.ProviderConfigSpec) *v1alpha1.ProviderConfig {
		return &v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "team-a"}, Spec: spec}
	}
	teamRef := &xpv2.ProviderConfigReference{Kind: v1alpha1.ProviderConfigKind, Name: "team"}
	cases := map[string]struct {
		reason    string
		ref       *xpv2.ProviderConfigReference
		objs      []client.Object
		overrides bool // FeatureNamespacedOverrides
		wantErr   string
		check     func(t *testing.T, e *external)
	}{
		"PolicyNamespaceDenied": {
			reason:  "A ClusterProviderConfig whose policy leaves the RelayConfig's namespace out is refused, naming the policy.",
			objs:    []client.Object{pc(v1alpha1.ProviderConfigSpec{Policy: &v1alpha1.Policy{Namespaces: []string{"team-b"}}})},
			wantErr: "ClusterProviderConfig default may not be used from namespace team-a: its spec.policy.namespaces allows [team-b]",
		},
		"PolicyNamespaceAllowed": {
			reason: "A namespace the policy lists may use it, and its allowed tags reach the external client.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{Policy: &v1alpha1.Policy{Namespaces: []string{"team-b", "team-a"}, Tags: []string{"tag:relay"}}})},
			check: func(t *testing.T, e *external) {
				if !cmp.Equal(e.allowedTags, tagPolicy{"tag:relay"}) {
					t.Errorf("allowed tags %v", e.allowedTags)
				}
			},
		},
		"NamespacedInjectedIdentity": {
			reason:  "A tenant's ProviderConfig may not borrow the provider pod's AWS identity.",
			ref:     teamRef,
			objs:    []client.Object{team(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsInjectedIdentity}})},
			wantErr: "ProviderConfig team-a/team: spec.aws.source InjectedIdentity uses the provider's own AWS identity, which a namespaced ProviderConfig may not",
		},
		"NamespacedAWSEndpoint": {
			reason:  "A tenant's ProviderConfig may not send AWS requests elsewhere.",
			ref:     teamRef,
			objs:    []client.Object{team(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsNone, Endpoint: "http://10.0.0.1"}})},
			wantErr: "spec.aws.endpoint",
		},
		"NamespacedTailscaleBaseURL": {
			reason:  "A tenant's ProviderConfig may not send Tailscale API requests elsewhere.",
			ref:     teamRef,
			objs:    []client.Object{team(v1alpha1.ProviderConfigSpec{Tailscale: &v1alpha1.TailscaleAPI{BaseURL: "http://10.0.0.1", OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth"}}})},
			wantErr: "spec.tailscale.baseURL",
		},
		"NamespacedProbeControlURL": {
			reason:  "A tenant's ProviderConfig may not have the provider's prober log in to a control server of its choosing.",
			ref:     teamRef,
			objs:    []client.Object{team(v1alpha1.ProviderConfigSpec{ControlURL: "http://10.0.0.1", Probe: &v1alpha1.Probe{Tags: []string{"tag:probe"}}})},
			wantErr: "spec.probe with spec.controlURL",
		},
		"NamespacedDNSServer": {
			reason:  "A namespaced ProviderConfig may not send the provider's DNS queries to a server of the tenant's choosing.",
			ref:     teamRef,
			objs:    []client.Object{team(v1alpha1.ProviderConfigSpec{DNS: &v1alpha1.DNSConfig{Server: "198.51.100.53:53"}})},
			wantErr: "spec.dns.server",
		},
		"TimeoutCapped": {
			reason: "A resolve timeout above 30 s, written before the schema bounded it, is held to 30 s.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{ResolveTimeout: &metav1.Duration{Duration: 5 * time.Minute}})},
			check: func(t *testing.T, e *external) {
				if e.resolver.Timeout != 30*time.Second {
					t.Errorf("resolve timeout %s, want 30s", e.resolver.Timeout)
				}
			},
		},
		"ProbeWithoutAPI": {
			reason: "spec.probe without spec.tailscale probes nothing and says why: the prober's key cannot be minted.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{Probe: &v1alpha1.Probe{Tags: []string{"tag:probe"}, Interval: &metav1.Duration{Duration: time.Second}}})},
			check: func(t *testing.T, e *external) {
				if e.reachability == nil || e.reachability.every != v1alpha1.MinProbeInterval {
					t.Fatalf("reachability %+v, want one every %s (an interval below it is raised)", e.reachability, v1alpha1.MinProbeInterval)
				}
				if _, err := e.reachability.prober(t.Context()); err == nil || !strings.Contains(err.Error(), "spec.probe needs spec.tailscale") {
					t.Errorf("prober: %v, want it to name spec.tailscale", err)
				}
			},
		},
		"NamespacedOverridesAllowed": {
			reason:    "The platform may allow it (--enable-namespaced-provider-config-overrides).",
			ref:       teamRef,
			overrides: true,
			objs:      []client.Object{team(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsNone, Endpoint: "http://10.0.0.1"}})},
		},
		"ClusterEndpoint": {
			reason: "A ClusterProviderConfig, the platform's, may set endpoints.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsNone, Endpoint: "http://10.0.0.1"}})},
		},
		"Defaults": {
			reason: "An empty ClusterProviderConfig resolves with the system DNS, the default timeout, no AWS and no API.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{})},
			check: func(t *testing.T, e *external) {
				if e.resolver.Timeout != v1alpha1.DefaultResolveTimeout*time.Second || e.resolver.AWS != nil || e.placement != nil || e.api != nil {
					t.Errorf("resolver %+v, api %v", e.resolver, e.api)
				}
			},
		},
		"DNSAndTimeout": {
			reason: "The DNS server, resolve timeout and control URL come from the provider config.",
			objs: []client.Object{pc(v1alpha1.ProviderConfigSpec{DNS: &v1alpha1.DNSConfig{Server: "10.0.0.10:53"},
				ResolveTimeout: &metav1.Duration{Duration: 3 * time.Second}, ControlURL: "https://hs.example.com"})},
			check: func(t *testing.T, e *external) {
				if e.resolver.DNS != (resolve.DNSResolver{Server: "10.0.0.10:53"}) || e.resolver.Timeout != 3*time.Second || e.controlURL != "https://hs.example.com" {
					t.Errorf("resolver %+v, control URL %q", e.resolver, e.controlURL)
				}
			},
		},
		"NamespacedProviderConfig": {
			reason: "A ProviderConfig is read from the RelayConfig's namespace.",
			ref:    &xpv2.ProviderConfigReference{Kind: v1alpha1.ProviderConfigKind, Name: "team"},
			objs:   []client.Object{&v1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "team-a"}}},
		},
		"Missing": {
			reason:  "A provider config that does not exist is an error naming it and the field.",
			wantErr: "cannot get ClusterProviderConfig default named by spec.providerConfigRef",
		},
		"BadKind": {
			reason:  "An unknown kind is an error naming the field.",
			ref:     &xpv2.ProviderConfigReference{Kind: "Other", Name: "x"},
			wantErr: `spec.providerConfigRef.kind "Other"`,
		},
		"TailscaleAPI": {
			reason: "OAuth credentials give an API client.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{Tailscale: tailscale}), oauth},
			check: func(t *testing.T, e *external) {
				if e.api == nil {
					t.Error("no API client")
				}
			},
		},
		"OAuthSecretMissing": {
			reason:  "A missing OAuth Secret is an error naming the field.",
			objs:    []client.Object{pc(v1alpha1.ProviderConfigSpec{Tailscale: tailscale})},
			wantErr: "spec.tailscale.oauthSecretRef",
		},
		"OAuthSecretIncomplete": {
			reason: "An OAuth Secret without both keys is an error naming them.",
			objs: []client.Object{pc(v1alpha1.ProviderConfigSpec{Tailscale: tailscale}),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-oauth", Namespace: "crossplane-system"}, Data: map[string][]byte{v1alpha1.OAuthClientIDKey: []byte("id")}}},
			wantErr: "needs keys " + v1alpha1.OAuthClientIDKey + " and " + v1alpha1.OAuthClientSecretKey,
		},
		"AWSSecret": {
			reason: "AWS credentials from a Secret give AWS resolution and the placement check.",
			objs: []client.Object{pc(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsSecret, Region: "eu-west-1",
				SecretRef: &v1alpha1.SecretRef{Name: "aws", Namespace: "crossplane-system"}}}), awsCreds},
			check: func(t *testing.T, e *external) {
				if e.resolver.AWS == nil || e.placement == nil {
					t.Errorf("resolver %+v", e.resolver)
				}
			},
		},
		"AWSSecretRefMissing": {
			reason:  "source Secret without secretRef is an error naming the field.",
			objs:    []client.Object{pc(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsSecret}})},
			wantErr: "spec.aws.secretRef is required",
		},
		"AWSNone": {
			reason: "source None means no AWS clients.",
			objs:   []client.Object{pc(v1alpha1.ProviderConfigSpec{AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsNone}})},
			check: func(t *testing.T, e *external) {
				if e.resolver.AWS != nil {
					t.Errorf("resolver %+v", e.resolver)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := newCluster(tc.objs...)
			con := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{}), namespacedOverrides: tc.overrides, probers: newProbers()}
			mg := relayConfig()
			ref := tc.ref
			if ref == nil {
				ref = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "default"}
			}
			mg.SetProviderConfigReference(ref)
			got, err := con.Connect(t.Context(), mg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nConnect error: %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nConnect: %v", tc.reason, err)
			}
			if tc.check != nil {
				tc.check(t, got.(*external))
			}
		})
	}
}

// TestConnectGivesUpWithoutCredentials: a RelayConfig being deleted whose
// provider config is gone (its namespace deleted with everything in it)
// waits a while for it, then goes without it, saying which device stays in
// the tailnet.
func TestConnectGivesUpWithoutCredentials(t *testing.T) {
	cases := map[string]struct {
		reason  string
		kind    string        // of the provider config; ClusterProviderConfig if unset
		deleted time.Duration // ago; 0 for a live RelayConfig
		// neverAdmitted: no provider config admitted it while it lived
		// (the others were, then lost theirs).
		neverAdmitted bool
		wantErr       bool
		wantEvent     string
	}{
		"Live": {
			reason:  "A live RelayConfig without its provider config fails Connect.",
			wantErr: true,
		},
		"JustDeleted": {
			reason:  "Within the grace period a ClusterProviderConfig may come back: Connect fails and is retried.",
			deleted: time.Minute,
			wantErr: true,
		},
		"DeletedLongAgo": {
			reason:    "After the grace period the RelayConfig goes without credentials, and a Warning names the device left behind.",
			deleted:   credentialsGrace + time.Minute,
			wantEvent: "device dev-1 stays in the tailnet",
		},
		"NamespacedGone": {
			reason:    "A namespaced ProviderConfig not found while its RelayConfig is deleted went with their namespace and will not come back: the RelayConfig goes at once, and a Warning names the device left behind.",
			kind:      v1alpha1.ProviderConfigKind,
			deleted:   time.Second,
			wantEvent: "gone from the namespace",
		},
		"NamespacedGoneLive": {
			reason:  "A live RelayConfig whose namespaced ProviderConfig is missing fails Connect.",
			kind:    v1alpha1.ProviderConfigKind,
			wantErr: true,
		},
		"NeverAdmitted": {
			reason:        "A RelayConfig no provider config ever admitted (composed with the finalizer, its tailnet missing) has nothing in the tailnet and no config Secret: it goes at once, silently.",
			deleted:       time.Second,
			neverAdmitted: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := newCluster() // no provider config
			var recorded events
			c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{}), record: &recorded}
			kind := stdcmp.Or(tc.kind, v1alpha1.ClusterProviderConfigKind)
			mg := relayConfig(func(rc *v1alpha1.RelayConfig) {
				if !tc.neverAdmitted {
					rc.Status.AtProvider.DeviceID = "dev-1"
					rc.Status.AtProvider.Admission = &v1alpha1.Admission{Kind: kind, Name: "team", UID: "gone"}
				}
			})
			mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: kind, Name: "team"})
			if tc.deleted > 0 {
				mg.SetDeletionTimestamp(&metav1.Time{Time: time.Now().Add(-tc.deleted)})
			}
			got, err := c.Connect(t.Context(), mg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nConnect error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if err == nil && got.(*external).api != nil {
				t.Errorf("%s\nan external client with API access, without credentials", tc.reason)
			}
			switch {
			case tc.wantEvent == "" && len(recorded) > 0:
				t.Errorf("%s\nevents %v, want none", tc.reason, recorded)
			case tc.wantEvent != "" && (len(recorded) != 1 || !strings.Contains(recorded[0].Message, tc.wantEvent)):
				t.Errorf("%s\nevents %v, want one containing %q", tc.reason, recorded, tc.wantEvent)
			}
		})
	}
}

// TestConnectKeepsClients: the API clients are made once per provider
// config settings and credentials and kept across reconciles (a client
// keeps its OAuth token, an AWS configuration its credentials cache); new
// credentials make new ones.
func TestConnectKeepsClients(t *testing.T) {
	pc := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.ProviderConfigSpec{
		AWS:       &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsSecret, Region: "eu-west-1", SecretRef: &v1alpha1.SecretRef{Name: "aws", Namespace: "crossplane-system"}},
		Tailscale: &v1alpha1.TailscaleAPI{OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth", Namespace: "crossplane-system"}},
	}}
	awsCreds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws", Namespace: "crossplane-system"},
		Data: map[string][]byte{v1alpha1.AWSAccessKeyIDKey: []byte("AKIA1"), v1alpha1.AWSSecretAccessKeyKey: []byte("s")}}
	oauth := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-oauth", Namespace: "crossplane-system"},
		Data: map[string][]byte{v1alpha1.OAuthClientIDKey: []byte("id"), v1alpha1.OAuthClientSecretKey: []byte("secret")}}
	kube := newCluster(pc, awsCreds, oauth)
	c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{})}
	connect := func() *external {
		t.Helper()
		mg := relayConfig()
		mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "default"})
		e, err := c.Connect(t.Context(), mg)
		if err != nil {
			t.Fatal(err)
		}
		return e.(*external)
	}
	first, second := connect(), connect()
	if first.api != second.api || first.resolver.AWS != second.resolver.AWS || first.placement.EC2 != second.placement.EC2 {
		t.Error("a second reconcile made new API clients with the same settings and credentials")
	}
	awsCreds.Data[v1alpha1.AWSAccessKeyIDKey] = []byte("AKIA2")
	if err := kube.Update(t.Context(), awsCreds); err != nil {
		t.Fatal(err)
	}
	if rotated := connect(); rotated.resolver.AWS == first.resolver.AWS || rotated.api != first.api {
		t.Error("rotated AWS credentials: want new AWS clients and the same Tailscale API client")
	}
}

// TestConnectAdmission: the provider records which provider config
// admitted a live RelayConfig (kind, name and UID), and a RelayConfig being
// deleted gets credentials only from that one. The hostile tenant's path:
// a RelayConfig admitted by its own provider config, then pointed at
// another team's (refused while it lives), must not get that team's OAuth
// client at deletion, when the namespace policy is no longer checked.
func TestConnectAdmission(t *testing.T) {
	own := v1alpha1.Admission{Kind: v1alpha1.ClusterProviderConfigKind, Name: "team-a", UID: "uid-a"}
	cases := map[string]struct {
		reason        string
		ref           string // the ClusterProviderConfig the RelayConfig names now
		admission     *v1alpha1.Admission
		deleting      bool
		wantErr       string
		wantAPI       bool
		wantAdmission *v1alpha1.Admission
		wantUsage     bool
		wantEvent     string
	}{
		"LiveAdmitted": {
			reason:        "A live RelayConfig its provider config's policy admits is recorded as admitted by it, and its usage tracked.",
			ref:           "team-a",
			wantAPI:       true,
			wantAdmission: &own,
			wantUsage:     true,
		},
		"LiveRefused": {
			reason:    "A live RelayConfig another team's policy refuses is not recorded as admitted, and pins nothing: no ProviderConfigUsage.",
			ref:       "team-b",
			admission: &own,
			wantErr:   "may not be used from namespace team-a",
			// The earlier admission stays: it names team-a's config, not team-b's.
			wantAdmission: &own,
		},
		"DeletingAdmitted": {
			reason:        "A RelayConfig being deleted uses the provider config that admitted it, to remove its device.",
			ref:           "team-a",
			admission:     &own,
			deleting:      true,
			wantAPI:       true,
			wantAdmission: &own,
		},
		"DeletingNeverAdmitted": {
			reason:    "A RelayConfig being deleted that names another team's provider config, which never admitted it, goes at once without its credentials; a Warning names the device left.",
			ref:       "team-b",
			admission: &own,
			deleting:  true,
			wantEvent: "device dev-1 stays in the tailnet",
			// unchanged
			wantAdmission: &own,
		},
		"DeletingNoRecord": {
			reason:    "A RelayConfig being deleted with no admission recorded gets no credentials.",
			ref:       "team-a",
			deleting:  true,
			wantEvent: "did not admit this RelayConfig",
		},
		"DeletingRecreatedConfig": {
			reason:        "A provider config deleted and made again under the same name is another: it did not admit the RelayConfig.",
			ref:           "team-a",
			admission:     &v1alpha1.Admission{Kind: v1alpha1.ClusterProviderConfigKind, Name: "team-a", UID: "uid-old"},
			deleting:      true,
			wantEvent:     "UID uid-old",
			wantAdmission: &v1alpha1.Admission{Kind: v1alpha1.ClusterProviderConfigKind, Name: "team-a", UID: "uid-old"},
		},
	}
	oauth := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-oauth", Namespace: "crossplane-system"},
		Data: map[string][]byte{v1alpha1.OAuthClientIDKey: []byte("id"), v1alpha1.OAuthClientSecretKey: []byte("secret")}}
	config := func(name, uid, allows string) *v1alpha1.ClusterProviderConfig {
		return &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}, Spec: v1alpha1.ProviderConfigSpec{
			Policy:    &v1alpha1.Policy{Namespaces: []string{allows}},
			Tailscale: &v1alpha1.TailscaleAPI{OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth", Namespace: "crossplane-system"}},
		}}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := newCluster(oauth, config("team-a", "uid-a", ns), config("team-b", "uid-b", "team-b"))
			var recorded events
			c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{}), record: &recorded,
				newAPI: func(_, _, _, _ string) (tailnet.API, error) { return &fakeAPI{}, nil }}
			mg := relayConfig(func(rc *v1alpha1.RelayConfig) {
				rc.Status.AtProvider.DeviceID = "dev-1"
				rc.Status.AtProvider.Admission = tc.admission
				if tc.deleting {
					now := metav1.Now()
					rc.SetDeletionTimestamp(&now)
				}
			})
			mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: tc.ref})
			got, err := c.Connect(t.Context(), mg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nConnect error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("%s\nConnect: %v", tc.reason, err)
			} else if hasAPI := got.(*external).api != nil; hasAPI != tc.wantAPI {
				t.Errorf("%s\nTailscale API access: %v, want %v", tc.reason, hasAPI, tc.wantAPI)
			}
			if diff := cmp.Diff(tc.wantAdmission, mg.Status.AtProvider.Admission); diff != "" {
				t.Errorf("%s\nstatus.atProvider.admission (-want +got):\n%s", tc.reason, diff)
			}
			usages := &v1alpha1.ProviderConfigUsageList{}
			if err := kube.List(t.Context(), usages); err != nil {
				t.Fatal(err)
			}
			if tracked := len(usages.Items) > 0; tracked != tc.wantUsage {
				t.Errorf("%s\nProviderConfigUsage written: %v, want %v", tc.reason, tracked, tc.wantUsage)
			}
			switch {
			case tc.wantEvent == "" && len(recorded) > 0:
				t.Errorf("%s\nevents %v, want none", tc.reason, recorded)
			case tc.wantEvent != "" && (len(recorded) != 1 || !strings.Contains(recorded[0].Message, tc.wantEvent)):
				t.Errorf("%s\nevents %v, want one containing %q", tc.reason, recorded, tc.wantEvent)
			}
		})
	}
}
