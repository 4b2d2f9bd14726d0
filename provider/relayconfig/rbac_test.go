package relayconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// grantedByCrossplane are the core resources Crossplane's RBAC manager lets
// every provider do anything with, in every namespace (v2.4.0
// internal/controller/rbac/provider/roles: Secrets, ConfigMaps, Events and
// Leases); it binds them to the ServiceAccount of the provider's
// Deployment, the one package/rbac/provider.yaml names.
var grantedByCrossplane = []string{"secrets", "configmaps", "events", "leases"}

// TestProviderRBACIsExact diffs what the provider may do (Crossplane's
// grants and the ClusterRole we ship in package/rbac/provider.yaml) against
// the requests it really makes while it resolves, writes, mints, restores
// and deletes: every call must be granted, and every verb our ClusterRole
// grants must be used.
func TestProviderRBACIsExact(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	granted := grantedByManifest(t, filepath.Join(root, "package/rbac/provider.yaml"))

	reqs := &providertest.RequestCounter{}
	api := tailnettest.StartFakeAPI(t)
	e := startWith(t, providertest.Options{Requests: reqs, ProviderConfig: v1alpha1.ProviderConfigSpec{
		Tailscale: &v1alpha1.TailscaleAPI{BaseURL: api.URL, OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth", Namespace: "team-a"}},
	}})
	ctx := context.Background()
	must(t, e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "ts-oauth"},
		Data: map[string][]byte{"client_id": []byte("client-id"), "client_secret": []byte("client-secret")}}))
	must(t, e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "ts-auth"}, Data: map[string][]byte{"authkey": []byte("tskey-auth-x")}}))

	// A replica with an Inline key, one with a minted key whose traffic is
	// sampled (its pod is read; it does not exist here).
	e.service(t, "r-0", corev1.LoadBalancerIngress{IP: "203.0.113.5"})
	e.relayConfig(t, "r-0", func(rc *v1alpha1.RelayConfig) { rc.Spec.ForProvider.AuthKeySecretRef.Mode = v1alpha1.AuthKeyModeInline })
	e.service(t, "r-1", corev1.LoadBalancerIngress{IP: "203.0.113.6"})
	e.relayConfig(t, "r-1", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.AuthKeySecretRef = nil
		rc.Spec.ForProvider.Traffic = &v1alpha1.TrafficSource{Pod: "r-1-0", Port: 9002}
	})
	// A replica on its node's host port: its pod and its node are read.
	must(t, e.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-rbac"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.40"}}}}))
	n := &corev1.Node{}
	must(t, e.c.Get(ctx, types.NamespacedName{Name: "node-rbac"}, n))
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.40"}}
	must(t, e.c.Status().Update(ctx, n))
	must(t, e.c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "r-2-0"},
		Spec: corev1.PodSpec{NodeName: "node-rbac", Containers: []corev1.Container{{Name: "tailscaled", Image: "tailscale/tailscale"}}}}))
	e.relayConfig(t, "r-2", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.AuthKeySecretRef.Mode = v1alpha1.AuthKeyModeInline
		rc.Spec.ForProvider.Node = &v1alpha1.NodeEndpoint{Pod: "r-2-0", Mode: v1alpha1.NodeModeHostPort}
	})
	e.waitFor(t, "r-1", "a minted key", func(rc *v1alpha1.RelayConfig) bool { return rc.Status.AtProvider.AuthKeyID != "" })
	e.config(t, "r-2-config", "its node's address", endpointsAre("198.51.100.40:41641"))
	e.config(t, "r-0-config", "the endpoint", endpointsAre("203.0.113.5:41641"))
	// A hand edit is put right (update); deletion removes the config (delete).
	s := &corev1.Secret{}
	must(t, e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "r-0-config"}, s))
	s.Data[tsconfig.FileName] = []byte(`{}`)
	must(t, e.c.Update(ctx, s))
	e.config(t, "r-0-config", "the restored endpoint", endpointsAre("203.0.113.5:41641"))
	must(t, e.c.Delete(ctx, e.get(t, "r-0")))
	e.waitGone(t, &corev1.Secret{}, "r-0-config", "the config Secret")

	used := reqs.Used()
	var missing, unused []string
	for a := range used {
		if a.Group != "" || slices.Contains(grantedByCrossplane, a.Resource) {
			continue // the provider's own CRDs and the above: Crossplane grants those
		}
		if !granted[a] {
			missing = append(missing, a.Resource+":"+a.Verb)
		}
	}
	for a := range granted {
		// client-go's informers start with a streaming watch and fall back
		// to a list where the API server cannot stream: list goes with watch.
		impliedByWatch := a.Verb == "list" && used[providertest.Access{Group: a.Group, Resource: a.Resource, Verb: "watch"}]
		if !used[a] && !impliedByWatch {
			unused = append(unused, a.Resource+":"+a.Verb)
		}
	}
	sort.Strings(missing)
	sort.Strings(unused)
	if len(missing) > 0 {
		t.Errorf("the provider makes calls package/rbac/provider.yaml does not grant: %v", missing)
	}
	if len(unused) > 0 {
		t.Errorf("package/rbac/provider.yaml grants verbs the provider never uses (least privilege): %v", unused)
	}
}

func grantedByManifest(t *testing.T, path string) map[providertest.Access]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[providertest.Access]bool{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil || cr.Kind != "ClusterRole" {
			continue
		}
		for _, r := range cr.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out[providertest.Access{Group: g, Resource: res, Verb: v}] = true
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no ClusterRole rules in %s", path)
	}
	return out
}

// TestTenantRoleIsT0: the tenant ClusterRole we ship (package/rbac/
// tenant.yaml) grants T0 exactly, as docs/security.md says: PeerRelays,
// RelayConfigs read-only; no status, no RelayConfig writes, no provider
// configs.
func TestTenantRoleIsT0(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	granted := grantedByManifest(t, filepath.Join(root, "package/rbac/tenant.yaml"))
	want := map[providertest.Access]bool{}
	for _, v := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		want[providertest.Access{Group: "peerrelay.io", Resource: "peerrelays", Verb: v}] = true
	}
	for _, v := range []string{"get", "list", "watch"} {
		want[providertest.Access{Group: "relay.peerrelay.io", Resource: "relayconfigs", Verb: v}] = true
	}
	if diff := cmp.Diff(want, granted); diff != "" {
		t.Errorf("package/rbac/tenant.yaml is not T0 (-want +got):\n%s", diff)
	}
}
