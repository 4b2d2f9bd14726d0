package crossplane

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/test/harness"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// providerFromImage runs the provider as Crossplane's default runtime runs
// it on a user's cluster, from its image: two replicas under leader
// election, reaching the Tailscale API over HTTPS with a CA the platform
// hands in through the DeploymentRuntimeConfig (SSL_CERT_FILE), as behind
// a corporate proxy. The leader mints each replica's key once, the
// replicas log in with them, and deleting the PeerRelay deletes each
// replica's device through the API.
func (s *system) providerFromImage(ctx context.Context, t *testing.T) {
	const ns, name, tailnet = "team-https", "relay", "https-tailnet"
	l, err := net.Listen("tcp", net.JoinHostPort(s.node.ServicesIP().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, ca := harness.TLSServerConfig(t, s.node.ServicesIP())
	api := tailnettest.StartFakeAPITLS(t, l, tlsConfig)

	objs := []string{
		fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"corporate-ca","namespace":%q},"data":{"ca.crt":%q}}`, xpharness.CrossplaneNamespace, ca),
		fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"tailnet-oauth","namespace":%q},"stringData":{"client_id":"client-id","client_secret":"client-secret"}}`, xpharness.CrossplaneNamespace),
		fmt.Sprintf(`{"apiVersion":%q,"kind":"ClusterProviderConfig","metadata":{"name":%q},"spec":{"tailscale":{"baseURL":%q,"oauthSecretRef":{"name":"tailnet-oauth","namespace":%q}}}}`, relayAPI, tailnet, api.URL, xpharness.CrossplaneNamespace),
	}
	for _, o := range objs {
		if out, err := s.KubectlIn(t, []byte(o), "apply", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	s.providerReplicasWithCA(ctx, t, 2, "corporate-ca")

	if out, err := s.Kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	s.applyPeerRelay(t, ns, name, "replicas: 2\ntailnet: "+tailnet)
	s.waitReady(ctx, t, ns, name, 3*time.Minute)

	// One key per replica: the standby minted nothing.
	if n := countCalls(api, "POST", "/api/v2/tailnet/-/keys"); n != 2 {
		t.Errorf("keys minted: %d, want 2 (one per replica, by the leader only)", n)
	}
	// Among the pods of the runtime config: a pod of the previous one may
	// still be stopping, and held the lease before.
	current := &corev1.PodList{}
	if err := s.Admin.List(ctx, current, client.InNamespace(xpharness.CrossplaneNamespace)); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, p := range current.Items {
		live[p.Name] = p.DeletionTimestamp == nil
	}
	leaders := 0
	for pod, log := range s.node.LogsByPrefix(xpharness.CrossplaneNamespace, providerName) {
		if live[pod] && strings.Contains(log, "Successfully acquired lease") {
			leaders++
			t.Logf("leader: %s", pod)
		}
	}
	if leaders != 1 {
		t.Errorf("%d provider pods acquired the lease, want 1", leaders)
	}
	s.providerMetrics(ctx, t)
	lease := &coordinationv1.Lease{}
	if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: xpharness.CrossplaneNamespace, Name: "crossplane-leader-election-provider-peerrelay"}, lease); err != nil {
		t.Errorf("the leader election Lease: %v", err)
	}

	// Each replica's device, as the provider recorded it, is deleted
	// through the API when the PeerRelay goes. The tailnet knows each
	// device by the hostname and tags its key was minted for, as the
	// provider checks before deleting it.
	devices := s.recordDevices(ctx, t, api, ns, 2)
	t.Run("HostileTenant", func(t *testing.T) { s.hostileTenant(ctx, t, api, ns, tailnet, devices) })
	if out, err := s.Kubectl(t, "-n", ns, "delete", "peerrelay", name, "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.waitEmpty(ctx, t, ns, 90*time.Second)
	for _, id := range devices {
		if api.HasDevice(id) {
			t.Errorf("device %s is still in the tailnet", id)
		}
		if n := countCalls(api, "DELETE", "/api/v2/device/"+id); n != 1 {
			t.Errorf("device %s deleted %d times over HTTPS, want 1", id, n)
		}
	}
	s.providerReplicasWithCA(ctx, t, 1, "")
}

// providerMetrics: the leading provider pod serves, on the metrics port
// Crossplane's runtime gives it, the managed resource metrics Crossplane
// providers report: how many RelayConfigs exist and are ready (in the whole
// cluster, all of them ready here), and the managed reconciler's time to
// first readiness; and the provider's own: keys minted and API calls by
// outcome, resolution times.
func (s *system) providerMetrics(ctx context.Context, t *testing.T) {
	t.Helper()
	// peerrelay_replica_reachable has a series per probed replica only:
	// Reachability checks it, from a provider that probes.
	dashboard := slices.DeleteFunc(dashboardMetrics(t, "peerrelay_", "crossplane_"), func(m string) bool { return m == "peerrelay_replica_reachable" })
	harness.Eventually(t, 30*time.Second, "a provider pod reports the RelayConfigs", func(ctx context.Context) error {
		rcs, err := s.List(ctx, relayAPI, "RelayConfig", "")
		if err != nil {
			return err
		}
		exists := fmt.Sprintf(`crossplane_managed_resource_exists{gvk="relay.peerrelay.io/v1alpha1, Kind=RelayConfig"} %d`, len(rcs))
		ready := fmt.Sprintf(`crossplane_managed_resource_ready{gvk="relay.peerrelay.io/v1alpha1, Kind=RelayConfig"} %d`, len(rcs))
		pods := &corev1.PodList{}
		if err := s.Admin.List(ctx, pods, client.InNamespace(xpharness.CrossplaneNamespace)); err != nil {
			return err
		}
		var seen []string
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, providerName) || p.Status.PodIP == "" {
				continue
			}
			body, err := scrapeMetrics(ctx, p.Status.PodIP, 8080)
			if err != nil {
				seen = append(seen, p.Name+": "+err.Error())
				continue
			}
			// And the provider's own: the leader minted one key per
			// replica, and timed every resolution.
			if strings.Contains(body, exists) && strings.Contains(body, ready) && strings.Contains(body, "crossplane_managed_resource_first_time_to_readiness_seconds_count") &&
				strings.Contains(body, "peerrelay_auth_keys_minted_total 2") && strings.Contains(body, `peerrelay_tailscale_api_calls_total{call="create_key",outcome="ok"} 2`) &&
				strings.Contains(body, `peerrelay_resolve_duration_seconds_count{outcome="ok"}`) {
				if m := missing(dashboard, "\n"+body); len(m) > 0 {
					return fmt.Errorf("docs/grafana-dashboard.json queries %v, which the provider does not export", m)
				}
				return nil
			}
			var state []string
			for l := range strings.Lines(body) {
				if (strings.HasPrefix(l, "crossplane_managed_resource_") || strings.HasPrefix(l, "peerrelay_")) && !strings.Contains(l, "_bucket") {
					state = append(state, strings.TrimSpace(l))
				}
			}
			seen = append(seen, fmt.Sprintf("%s: %q", p.Name, state))
		}
		return fmt.Errorf("want %q and %q from a provider pod: %v", exists, ready, seen)
	})
}

func countCalls(api *tailnettest.FakeAPI, method, path string) int {
	return len(callsTo(api, method, path))
}

// callsTo are the calls made to api with method on path, in order.
func callsTo(api *tailnettest.FakeAPI, method, path string) []tailnettest.Call {
	var out []tailnettest.Call
	for _, c := range api.Recorded() {
		if c.Method == method && c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// providerReplicasWithCA sets the provider's DeploymentRuntimeConfig (the
// one package/rbac/provider.yaml applies) to run replicas pods that trust
// only the CA in ConfigMap caConfigMap (none: back to the image's roots),
// and waits until those pods are the ready ones.
func (s *system) providerReplicasWithCA(ctx context.Context, t testing.TB, replicas int64, caConfigMap string) {
	t.Helper()
	drc, err := s.Get(ctx, "pkg.crossplane.io/v1beta1", "DeploymentRuntimeConfig", "", "provider-peerrelay")
	if err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(drc.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	delete(c, "env")
	delete(c, "volumeMounts")
	var volumes []any
	if caConfigMap != "" {
		c["env"] = []any{map[string]any{"name": "SSL_CERT_FILE", "value": "/etc/corporate-ca/ca.crt"}}
		c["volumeMounts"] = []any{map[string]any{"name": "corporate-ca", "mountPath": "/etc/corporate-ca", "readOnly": true}}
		volumes = []any{map[string]any{"name": "corporate-ca", "configMap": map[string]any{"name": caConfigMap}}}
	}
	_ = unstructured.SetNestedSlice(drc.Object, containers, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	_ = unstructured.SetNestedSlice(drc.Object, volumes, "spec", "deploymentTemplate", "spec", "template", "spec", "volumes")
	_ = unstructured.SetNestedField(drc.Object, replicas, "spec", "deploymentTemplate", "spec", "replicas")
	if err := s.Admin.Update(ctx, drc); err != nil {
		t.Fatal(err)
	}
	// The revision's runtime config came from an ImageConfig, so a change
	// to it reaches the Deployment at the revision's next reconcile: ask
	// for one now.
	revs, err := s.List(ctx, "pkg.crossplane.io/v1", "ProviderRevision", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range revs {
		orig := revs[i].DeepCopy()
		revs[i].SetAnnotations(map[string]string{"peerrelay.test/runtime-config": fmt.Sprint(time.Now().UnixNano())})
		if err := s.Admin.Patch(ctx, &revs[i], client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("%d provider pods ready with the runtime config", replicas), func(context.Context) error {
		ds := &appsv1.DeploymentList{}
		if err := s.Admin.List(ctx, ds, client.InNamespace(xpharness.CrossplaneNamespace)); err != nil {
			return err
		}
		for _, d := range ds.Items {
			if !strings.HasPrefix(d.Name, providerName) {
				continue
			}
			env := d.Spec.Template.Spec.Containers[0].Env
			hasCA := slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "SSL_CERT_FILE" })
			st := d.Status
			if d.Spec.Replicas == nil || int64(*d.Spec.Replicas) != replicas || hasCA != (caConfigMap != "") {
				return fmt.Errorf("Deployment %s not rendered from the runtime config yet", d.Name)
			}
			if st.ObservedGeneration != d.Generation || int64(st.UpdatedReplicas) != replicas || int64(st.ReadyReplicas) != replicas || st.Replicas != st.UpdatedReplicas {
				return fmt.Errorf("Deployment %s: %d updated, %d ready, %d in all", d.Name, st.UpdatedReplicas, st.ReadyReplicas, st.Replicas)
			}
			return nil
		}
		return fmt.Errorf("no provider Deployment")
	})
}
