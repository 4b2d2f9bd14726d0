package relayconfig

import (
	"slices"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/fake"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// TestReconcilerWrites runs crossplane-runtime's managed reconciler, with
// the options Setup gives it, over one RelayConfig and counts what it
// writes. Each deviation listed in doc.go has its own check here, which
// fails when the deviation is removed.
func TestReconcilerWrites(t *testing.T) {
	rc := relayConfig(func(rc *v1alpha1.RelayConfig) {
		rc.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "default"})
		rc.SetManagementPolicies(xpv2.ManagementPolicies{xpv2.ManagementActionAll}) // the CRD's default
	})
	kube := newCluster(rc, service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}),
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{})}
	mgr := &fake.Manager{Client: kube, Scheme: testScheme()}
	r := newReconciler(mgr, c)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: rc.Name}}

	reconcileOnce := func(what string) (relayConfigWrites, secretWrites, serviceGets []string) {
		t.Helper()
		kube.writes, kube.gets = nil, nil
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, g := range kube.gets {
			if g == "Service/r-0" {
				serviceGets = append(serviceGets, g)
			}
		}
		return kube.writesTo("RelayConfig"), kube.writesTo("Secret"), serviceGets
	}

	// The first reconcile: the finalizer and one status write.
	rcWrites, secretWrites, serviceGets := reconcileOnce("first reconcile")
	if want := []string{"update RelayConfig/r-0", "update status RelayConfig/r-0"}; !cmp.Equal(want, rcWrites) {
		t.Errorf("first reconcile wrote %v to the RelayConfig, want %v: every write is a watch event on the PeerRelay, counted by Crossplane's watch circuit breaker", rcWrites, want)
	}
	if want := []string{"create Secret/r-0", "create Secret/r-0-config"}; !cmp.Equal(want, secretWrites) {
		t.Errorf("first reconcile wrote Secrets %v, want %v", secretWrites, want)
	}
	stored := &v1alpha1.RelayConfig{}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(rc), stored); err != nil {
		t.Fatal(err)
	}

	t.Run("MissingSecretIsUpdated", func(t *testing.T) {
		// Observe reports a missing config Secret as existing, so Update
		// writes it: Create would cost the create-pending and
		// create-succeeded annotation writes.
		for _, a := range []string{meta.AnnotationKeyExternalCreatePending, meta.AnnotationKeyExternalCreateSucceeded} {
			if _, ok := stored.GetAnnotations()[a]; ok {
				t.Errorf("the RelayConfig carries %s: the config Secret was written by Create", a)
			}
		}
	})
	t.Run("NoExternalName", func(t *testing.T) {
		if n := meta.GetExternalName(stored); n != "" {
			t.Errorf("the RelayConfig carries external name %q: the default initializer's write is back", n)
		}
	})
	t.Run("StatusKeptAcrossFinalizer", func(t *testing.T) {
		if got := stored.Status.AtProvider.Endpoints; !slices.Equal(got, []string{"203.0.113.5:41641"}) {
			t.Errorf("stored status.atProvider.endpoints %v after the first reconcile: the finalizer's write lost the observation", got)
		}
	})
	t.Run("ObserveHandsOverToUpdate", func(t *testing.T) {
		// Update writes what Observe rendered: one resolution per
		// reconcile, and the config written is the one observed.
		if len(serviceGets) != 1 {
			t.Errorf("the first reconcile read the Service %d times, want 1: Update resolved again instead of writing what Observe rendered", len(serviceGets))
		}
	})

	// At rest nothing changes, and nothing is written: not even the
	// reconciler's status update that ends every reconcile, a no-op to
	// the API server but a write request all the same.
	rcWrites, secretWrites, _ = reconcileOnce("second reconcile")
	if len(secretWrites) > 0 {
		t.Errorf("a reconcile at rest wrote Secrets %v, want none", secretWrites)
	}
	t.Run("NoOpStatusNotSent", func(t *testing.T) {
		if len(rcWrites) > 0 {
			t.Errorf("a reconcile at rest wrote %v to the RelayConfig, want nothing", rcWrites)
		}
	})
	again := &v1alpha1.RelayConfig{}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(rc), again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, again, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion")); diff != "" {
		t.Errorf("a reconcile at rest changed the RelayConfig (-before +after):\n%s", diff)
	}
}

// TestComposedFinalizer: the function composes every RelayConfig with the
// managed reconciler's finalizer, so the provider's first reconcile writes
// the status alone: one write, one watch event on the PeerRelay, fewer.
func TestComposedFinalizer(t *testing.T) {
	if v1alpha1.Finalizer != managed.FinalizerName {
		t.Fatalf("v1alpha1.Finalizer is %q, crossplane-runtime's managed reconciler's is %q", v1alpha1.Finalizer, managed.FinalizerName)
	}
	rc := relayConfig(func(rc *v1alpha1.RelayConfig) {
		rc.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: "default"})
		rc.SetManagementPolicies(xpv2.ManagementPolicies{xpv2.ManagementActionAll})
		rc.SetFinalizers([]string{v1alpha1.Finalizer})
	})
	kube := newCluster(rc, service(corev1.LoadBalancerIngress{IP: "203.0.113.5"}),
		&v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	c := &connector{kube: kube, read: kube, usage: resource.NewProviderConfigUsageTracker(kube, &v1alpha1.ProviderConfigUsage{})}
	r := newReconciler(&fake.Manager{Client: kube, Scheme: testScheme()}, c)
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: rc.Name}}); err != nil {
		t.Fatal(err)
	}
	if got, want := kube.writesTo("RelayConfig"), []string{"update status RelayConfig/r-0"}; !cmp.Equal(want, got) {
		t.Errorf("the first reconcile of a RelayConfig composed with its finalizer wrote %v, want %v", got, want)
	}
}
