package crossplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/test/harness"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// evilNamespace is the hostile tenant's: it may write PeerRelays and
// Secrets there, and nothing else.
const evilNamespace = "team-evil"

// hostileTenant plays a tenant of namespace team-evil against the running
// system while another team's PeerRelay (victimNS/victim, on
// ClusterProviderConfig victimTailnet, with victimDevices in the tailnet,
// by RelayConfig) runs. The platform gives team-evil a ClusterProviderConfig
// of its own that mints only tag:team-evil, and keeps victimTailnet for
// victimNS. The tenant asks for the other team's tailnet and for
// tag:admin, squats the name of a config Secret, names its replicas as the
// victim's and writes a victim device's ID into a replica's state Secret,
// runs a relay image whose metrics redirect, and finally has its namespace
// deleted. Nothing outside team-evil changes: no Secret, no device but its
// own, no key with tags it was not given; its own devices go with its
// namespace, within 60 s.
func (s *system) hostileTenant(ctx context.Context, t *testing.T, api *tailnettest.FakeAPI, victimNS, victimTailnet string, victimDevices map[string]string) {
	const ownTailnet, ownTag = "team-evil-tailnet", "tag:team-evil"
	// The platform's side: each team its own ClusterProviderConfig.
	if out, err := s.Kubectl(t, "patch", "clusterproviderconfig.relay.peerrelay.io", victimTailnet, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"policy":{"namespaces":[%q]}}}`, victimNS)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.applyJSON(t, fmt.Sprintf(`{"apiVersion":%q,"kind":"ClusterProviderConfig","metadata":{"name":%q},"spec":{"tailscale":{"baseURL":%q,"oauthSecretRef":{"name":"tailnet-oauth","namespace":%q}},"policy":{"namespaces":[%q],"tags":[%q]}}}`,
		relayAPI, ownTailnet, api.URL, xpharness.CrossplaneNamespace, evilNamespace, ownTag))
	// A person's device, untagged, long in the tailnet.
	api.AddDevice("laptop-1", tailnettest.Device{Hostname: "ops-laptop", Created: time.Now().Add(-365 * 24 * time.Hour)})
	if out, err := s.Kubectl(t, "create", "namespace", evilNamespace); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	secretsBefore := s.secretVersions(ctx, t)
	devicesBefore := api.DeviceIDs()
	callsBefore := len(api.Recorded())

	// Another team's tailnet.
	s.applyPeerRelay(t, evilNamespace, "borrow", "replicas: 1\ntailnet: "+victimTailnet)
	s.waitRefused(ctx, t, "borrow", v1alpha1.ReasonTailnetUnavailable, "may not be used from namespace team-evil")
	// Tags its tailnet does not give it.
	s.applyPeerRelay(t, evilNamespace, "admin", "replicas: 1\ntailnet: "+ownTailnet+"\ntags: [\"tag:admin\"]")
	s.waitRefused(ctx, t, "admin", relayv1alpha1.ReasonKeyUnavailable, "[tag:admin] are not allowed by the provider config's spec.policy.tags")
	// A config Secret's name, taken before the PeerRelay composes it.
	squat := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: evilNamespace, Name: "squat-0-config"}, StringData: map[string]string{"cfg": "mine"}}
	if err := s.Admin.Create(ctx, squat); err != nil {
		t.Fatal(err)
	}
	s.applyPeerRelay(t, evilNamespace, "squat", "replicas: 1\ntailnet: "+ownTailnet+"\ntags: [\""+ownTag+"\"]")
	harness.Eventually(t, 90*time.Second, "the squatted config Secret refused", func(ctx context.Context) error {
		rc, err := s.Get(ctx, relayAPI, "RelayConfig", evilNamespace, "squat-0")
		if err != nil {
			return err
		}
		if st, msg := condition(rc, "Synced"); st != "False" || !strings.Contains(msg, "the Secret squat-0-config exists and is not controlled by this RelayConfig") {
			return fmt.Errorf("Synced %s: %s", st, msg)
		}
		return nil
	})
	// Replicas named as the victim's, on its own tailnet: they run. Their
	// devices are in the tailnet (played here, as in providerFromImage).
	s.applyPeerRelay(t, evilNamespace, "legit", "replicas: 2\nhostnamePrefix: relay\ntailnet: "+ownTailnet+"\ntags: [\""+ownTag+"\"]")
	s.waitReady(ctx, t, evilNamespace, "legit", 3*time.Minute)
	own := s.recordDevices(ctx, t, api, evilNamespace, 2)
	s.keySecretLoop(ctx, t, api, "legit-0")
	s.forgedStatus(ctx, t, "legit")
	s.redirectingMetrics(ctx, t, ownTailnet, ownTag)
	// A victim's device ID in a replica's state Secret: same hostname as
	// that replica, created minutes ago.
	victimID, tampered := victimDevices["relay-1"], own["legit-1"]
	s.writeDeviceID(ctx, t, "legit-1", victimID)
	harness.Eventually(t, 90*time.Second, "the tampered device ID recorded", func(ctx context.Context) error {
		rc, err := s.Get(ctx, relayAPI, "RelayConfig", evilNamespace, "legit-1")
		if err != nil {
			return err
		}
		if id, _, _ := unstructured.NestedString(rc.Object, "status", "atProvider", "deviceID"); id != victimID {
			return fmt.Errorf("deviceID %q", id)
		}
		return nil
	})

	// With RelayConfigs to write (T2), the pivot: one admitted by its own
	// provider config, then pointed at the victim's, which refuses it while
	// it lives, with a victim relay's device, newer than it and under its
	// hostname and tags, in its state Secret; then deleted.
	pivoted := s.pivot(ctx, t, api, ownTailnet, ownTag, victimNS, victimTailnet)

	// The refused PeerRelays go first: their pods never logged in, and
	// containerboot waits up to 25 s for a consistent state before it
	// stops one, which with Kubernetes' ordered namespace deletion (pods
	// first) would be most of the namespace's 60 s.
	if out, err := s.Kubectl(t, "-n", evilNamespace, "delete", "peerrelay", "borrow", "admin", "squat", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := s.Admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: evilNamespace}}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	logged := deleted
	harness.Eventually(t, 60*time.Second, "namespace "+evilNamespace+" gone", func(ctx context.Context) error {
		n := &corev1.Namespace{}
		err := s.Admin.Get(ctx, types.NamespacedName{Name: evilNamespace}, n)
		if kerrors.IsNotFound(err) {
			return nil
		}
		rcs, _ := s.List(ctx, relayAPI, "RelayConfig", evilNamespace)
		var left []string
		for _, rc := range rcs {
			_, msg := condition(&rc, "Synced")
			left = append(left, rc.GetName()+fmt.Sprint(rc.GetFinalizers())+" "+msg)
		}
		var remaining []string
		for _, c := range n.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				remaining = append(remaining, c.Message)
			}
		}
		err = fmt.Errorf("namespace still there (%v): %v; RelayConfigs left: %v", err, remaining, left)
		if time.Since(logged) > 10*time.Second {
			t.Logf("%s after the deletion: %v", time.Since(deleted).Round(time.Second), err)
			logged = time.Now()
		}
		return err
	})
	t.Logf("namespace %s gone %s after its deletion", evilNamespace, time.Since(deleted).Round(100*time.Millisecond))

	// Its own untampered device went; the tampered replica's device is
	// left (the tenant's loss); nobody else's was touched.
	want := slices.Sorted(slices.Values(append(slices.Clone(devicesBefore), tampered, pivoted)))
	if got := api.DeviceIDs(); !slices.Equal(got, want) {
		t.Errorf("devices after the namespace went: %v, want %v (before %v, the tenant's %v)", got, want, devicesBefore, own)
	}
	calls := api.Recorded()[callsBefore:]
	for _, c := range calls {
		switch {
		case c.Method == "DELETE" && strings.HasPrefix(c.Path, "/api/v2/device/") && c.Path != "/api/v2/device/"+own["legit-0"]:
			t.Errorf("the tenant's actions deleted device %s", strings.TrimPrefix(c.Path, "/api/v2/device/"))
		case c.Method == "POST" && c.Path == "/api/v2/tailnet/-/keys":
			if tags := mintedTags(c); !slices.Equal(tags, []string{ownTag}) {
				t.Errorf("a key was minted for the tenant with tags %v, want only [%s]", tags, ownTag)
			}
		}
	}
	if countCalls(api, "GET", "/api/v2/device/"+victimID) == 0 {
		t.Errorf("the provider never looked up the tampered device ID %s (replica legit-1, own device %s): the check was not exercised", victimID, tampered)
	}
	if diff := diffVersions(secretsBefore, s.secretVersions(ctx, t)); len(diff) > 0 {
		t.Errorf("Secrets outside %s changed: %v", evilNamespace, diff)
	}
}

// pivot plays the HIGH of issue 40 as a T2 tenant (RelayConfigs and
// Secrets in its namespace): RelayConfig pivot, admitted by its own
// provider config ownTailnet, is pointed at victimTailnet, whose policy
// refuses it; a relay device of the victim's that joins after it (its
// hostname and tags) is written into pivot's state Secret, and pivot is
// deleted. The provider, which recorded ownTailnet as what admitted it,
// takes nothing from victimTailnet at deletion: the device stays. It
// returns the victim's device's ID.
func (s *system) pivot(ctx context.Context, t *testing.T, api *tailnettest.FakeAPI, ownTailnet, ownTag, victimNS, victimTailnet string) string {
	t.Helper()
	victimRC, err := s.Get(ctx, relayAPI, "RelayConfig", victimNS, "relay-1")
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := unstructured.NestedString(victimRC.Object, "spec", "forProvider", "hostname")
	tags, _, _ := unstructured.NestedStringSlice(victimRC.Object, "spec", "forProvider", "tags")
	s.applyJSON(t, fmt.Sprintf(`{"apiVersion":%q,"kind":"RelayConfig","metadata":{"name":"pivot","namespace":%q},"spec":{"providerConfigRef":{"kind":"ClusterProviderConfig","name":%q},"forProvider":{"hostname":%q,"port":41641,"tags":[%q],"configSecretName":"pivot-config","stateSecretName":"pivot","staticEndpoints":["192.0.2.1:41641"]}}}`,
		relayAPI, evilNamespace, ownTailnet, host, ownTag))
	harness.Eventually(t, 90*time.Second, "pivot admitted by "+ownTailnet, func(ctx context.Context) error {
		rc, err := s.Get(ctx, relayAPI, "RelayConfig", evilNamespace, "pivot")
		if err != nil {
			return err
		}
		if name, _, _ := unstructured.NestedString(rc.Object, "status", "atProvider", "admission", "name"); name != ownTailnet {
			return fmt.Errorf("admission %v", rc.Object["status"])
		}
		if _, err := s.Get(ctx, "v1", "Secret", evilNamespace, "pivot"); err != nil {
			return fmt.Errorf("state Secret: %w", err)
		}
		return nil
	})
	patch := fmt.Sprintf(`{"spec":{"providerConfigRef":{"name":%q},"forProvider":{"tags":%s}}}`, victimTailnet, jsonList(tags))
	if out, err := s.Kubectl(t, "-n", evilNamespace, "patch", "relayconfig.relay.peerrelay.io", "pivot", "--type=merge", "-p", patch); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	harness.Eventually(t, 90*time.Second, "pivot refused by "+victimTailnet, func(ctx context.Context) error {
		rc, err := s.Get(ctx, relayAPI, "RelayConfig", evilNamespace, "pivot")
		if err != nil {
			return err
		}
		if st, msg := condition(rc, "ProviderConfigUsable"); st != "False" || !strings.Contains(msg, "may not be used from namespace "+evilNamespace) {
			return fmt.Errorf("ProviderConfigUsable %s: %s", st, msg)
		}
		return nil
	})
	const victimID = "victim-joined-later"
	api.AddDevice(victimID, tailnettest.Device{Hostname: host, Tags: tags, Created: time.Now()})
	s.writeDeviceID(ctx, t, "pivot", victimID)
	if out, err := s.Kubectl(t, "-n", evilNamespace, "delete", "relayconfig.relay.peerrelay.io", "pivot", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !api.HasDevice(victimID) {
		t.Errorf("the victim's device %s went with the tenant's RelayConfig pointed at %s", victimID, victimTailnet)
	}
	return victimID
}

func jsonList(l []string) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// applyJSON applies each object.
func (s *system) applyJSON(t testing.TB, objs ...string) {
	t.Helper()
	for _, o := range objs {
		if out, err := s.KubectlIn(t, []byte(o), "apply", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

// waitRefused waits until the tenant's PeerRelay name says reason, with
// msg in its message, and checks nothing was minted for it.
func (s *system) waitRefused(ctx context.Context, t *testing.T, name string, reason xpv2.ConditionReason, msg string) {
	t.Helper()
	harness.Eventually(t, 90*time.Second, "PeerRelay "+name+" refused", func(ctx context.Context) error {
		pr, err := s.Get(ctx, v2API, "PeerRelay", evilNamespace, name)
		if err != nil {
			return err
		}
		if st, m := condition(pr, v1alpha1.ConditionPeerRelayReady); st != "False" || !strings.HasPrefix(m, string(reason)+": ") || !strings.Contains(m, msg) {
			return fmt.Errorf("PeerRelayReady %s: %s", st, m)
		}
		return nil
	})
	keys := &corev1.SecretList{}
	if err := s.Admin.List(ctx, keys, client.InNamespace(evilNamespace), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys.Items {
		if strings.HasSuffix(k.Name, "-authkey") {
			t.Errorf("refused PeerRelay %s got a key Secret %s", name, k.Name)
		}
	}
}

// recordDevices waits for the device IDs of namespace ns's replicas, adds
// each to the tailnet as the replica's (hostname, tags), and returns them by
// RelayConfig.
func (s *system) recordDevices(ctx context.Context, t *testing.T, api *tailnettest.FakeAPI, ns string, n int) map[string]string {
	t.Helper()
	ids := map[string]string{}
	harness.Eventually(t, time.Minute, "device IDs recorded in "+ns, func(ctx context.Context) error {
		rcs, err := s.List(ctx, relayAPI, "RelayConfig", ns)
		if err != nil {
			return err
		}
		clear(ids)
		for _, rc := range rcs {
			if id, _, _ := unstructured.NestedString(rc.Object, "status", "atProvider", "deviceID"); id != "" {
				ids[rc.GetName()] = id
				host, _, _ := unstructured.NestedString(rc.Object, "spec", "forProvider", "hostname")
				tags, _, _ := unstructured.NestedStringSlice(rc.Object, "spec", "forProvider", "tags")
				api.AddDevice(id, tailnettest.Device{Hostname: host, Tags: tags, Created: time.Now()})
			}
		}
		if len(ids) != n {
			return fmt.Errorf("%d of %d device IDs: %v", len(ids), n, ids)
		}
		return nil
	})
	return ids
}

// secretVersions returns the resourceVersion of every Secret outside the
// hostile tenant's namespace.
func (s *system) secretVersions(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	l := &corev1.SecretList{}
	if err := s.Admin.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, sec := range l.Items {
		if sec.Namespace != evilNamespace {
			out[sec.Namespace+"/"+sec.Name] = sec.ResourceVersion
		}
	}
	return out
}

func diffVersions(before, after map[string]string) []string {
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if v, ok := after[k]; !ok {
			diff = append(diff, k+" deleted")
		} else if v != before[k] {
			diff = append(diff, k+" written")
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diff = append(diff, k+" created")
		}
	}
	return diff
}

// mintedTags are the tags a recorded key request asked for.
func mintedTags(c tailnettest.Call) []string {
	create, _, _ := unstructured.NestedSlice(c.Body, "capabilities", "devices", "create", "tags")
	var tags []string
	for _, v := range create {
		tags = append(tags, fmt.Sprint(v))
	}
	return tags
}

// keySecretLoop deletes replica's minted key Secret again and again, as a
// tenant after an unlimited supply of pre-authorised keys would, and
// checks that no key is minted for it: its device is logged in, so its
// config needs none (and were it not, the replica's own throttle and its
// namespace's mint budget would bound the keys: TestMintBudgets).
func (s *system) keySecretLoop(ctx context.Context, t *testing.T, api *tailnettest.FakeAPI, replica string) {
	t.Helper()
	keys := func() int {
		n := 0
		for _, c := range api.Recorded() {
			if c.Method == "POST" && c.Path == "/api/v2/tailnet/-/keys" && c.Body["description"] == "peer relay "+evilNamespace+"/"+replica {
				n++
			}
		}
		return n
	}
	before := keys()
	for i := range 5 {
		err := s.Admin.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: evilNamespace, Name: replica + "-authkey"}})
		if err != nil && !kerrors.IsNotFound(err) {
			t.Fatalf("deleting the key Secret (%d): %v", i, err)
		}
		time.Sleep(2 * time.Second)
	}
	if n := keys() - before; n > 0 {
		t.Errorf("%d keys minted for %s while its key Secret was deleted again and again; its device is logged in, so none is needed", n, replica)
	}
}

// forgedStatus plays a tenant that may write PeerRelay name's status (T1).
// Kubernetes' edit role does not give it: Crossplane v2.4's RBAC manager
// aggregates an XR and its status into its own crossplane-edit, not into
// edit. Bound to crossplane-edit, the tenant writes another address and a
// ready count: the function writes the truth back on the pass the write
// itself wakes, and nothing the PeerRelay composes (its RelayConfigs)
// changes.
func (s *system) forgedStatus(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	const user = "team-evil-dev"
	bind := func(role string) {
		s.applyJSON(t, fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"dev-%s","namespace":%q},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":%q}]}`, role, evilNamespace, role, user))
	}
	const forged = "192.0.2.66"
	patch := fmt.Sprintf(`{"status":{"addresses":%q,"readyReplicas":"2/2","endpoints":[{"replica":0,"address":%q,"port":41641}]}}`, forged, forged)
	forge := func() (string, error) {
		return s.Kubectl(t, "--as="+user, "-n", evilNamespace, "patch", "peerrelay.peerrelay.io", name, "--subresource=status", "--type=merge", "-p", patch)
	}
	bind("edit")
	if out, err := forge(); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("Kubernetes' edit role wrote the PeerRelay's status (%v): %s; docs/security.md says it does not", err, out)
	}
	bind("crossplane-edit")
	specs := func() map[string]string {
		rcs, err := s.List(ctx, relayAPI, "RelayConfig", evilNamespace)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, rc := range rcs {
			spec, _, _ := unstructured.NestedMap(rc.Object, "spec")
			out[rc.GetName()] = fmt.Sprint(spec)
		}
		return out
	}
	before := specs()
	harness.Eventually(t, 60*time.Second, "the tenant (crossplane-edit) writes the PeerRelay's status", func(context.Context) error {
		out, err := forge()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	harness.Eventually(t, 60*time.Second, "the function writes the PeerRelay's status back", func(ctx context.Context) error {
		u, err := s.Get(ctx, v2API, "PeerRelay", evilNamespace, name)
		if err != nil {
			return err
		}
		if a, _, _ := unstructured.NestedString(u.Object, "status", "addresses"); strings.Contains(a, forged) {
			return fmt.Errorf("status.addresses %q", a)
		}
		return nil
	})
	if after := specs(); !maps.Equal(before, after) {
		t.Errorf("a forged status changed the RelayConfigs:\nbefore %v\nafter  %v", before, after)
	}
}

// writeDeviceID writes device id into state Secret name of the tenant's
// namespace, as the tenant would: a merge patch of that one key, which
// the running tailscaled's own writes to the Secret cannot make conflict.
func (s *system) writeDeviceID(ctx context.Context, t *testing.T, name, id string) {
	t.Helper()
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: evilNamespace, Name: name}}
	patch := fmt.Appendf(nil, `{"data":{"device_id":%q}}`, base64.StdEncoding.EncodeToString([]byte(id)))
	if err := s.Admin.Patch(ctx, state, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("writing device ID %s into state Secret %s: %v", id, name, err)
	}
}
