package provider_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider"
	"github.com/peerrelay/peerrelay/test/harness"
)

// TestSafeStart: with Crossplane's safe-start, the RelayConfig CRD exists
// only once a policy activates it. The provider starts without it (its
// provider config controllers run), and starts its RelayConfig controller
// when the CRD is established: a RelayConfig made then is reconciled. A
// provider without the gate cannot start at all.
func TestSafeStart(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds := filepath.Join(root, "package/provider/crds")
	relayConfigCRD := filepath.Join(crds, "relay.peerrelay.io_relayconfigs.yaml")
	inactive := t.TempDir() // every CRD of the package but the RelayConfig's
	files, err := filepath.Glob(filepath.Join(crds, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == relayConfigCRD {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(inactive, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	api := harness.StartAPIServer(t, inactive)

	newManager := func() ctrl.Manager {
		scheme := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		mgr, err := provider.NewManager(api.Config, scheme, provider.ManagerOptions{SyncPeriod: time.Hour, MetricsAddress: "0", SkipNameValidation: true})
		if err != nil {
			t.Fatal(err)
		}
		return mgr
	}
	options := func() controller.Options {
		return controller.Options{Logger: logging.NewNopLogger(), MaxConcurrentReconciles: 1, PollInterval: time.Hour,
			GlobalRateLimiter: ratelimiter.NewGlobal(10), Features: &feature.Flags{}}
	}

	// Without the gate, the RelayConfig controller cannot be set up.
	if err := provider.Setup(newManager(), options()); err == nil || !strings.Contains(err.Error(), "RelayConfig") {
		t.Errorf("Setup without the gate and without the RelayConfig CRD: got %v, want an error naming RelayConfig", err)
	}

	mgr := newManager()
	o := options()
	o.Gate = new(gate.Gate[schema.GroupVersionKind])
	if err := provider.Setup(mgr, o); err != nil {
		t.Fatalf("Setup with the gate: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("the provider stopped with: %v", err)
		}
	})
	synced, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(synced) {
		t.Fatal("the provider's caches did not sync without the RelayConfig CRD")
	}

	// The policy activates the RelayConfig: Crossplane creates its CRD.
	if _, err := envtest.InstallCRDs(api.Config, envtest.CRDInstallOptions{Paths: []string{relayConfigCRD}}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(api.Config, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	rc := &v1alpha1.RelayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "relay-0"},
		Spec: v1alpha1.RelayConfigSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "absent"}},
			ForProvider: v1alpha1.RelayConfigParameters{
				ConfigSecretName: "relay-0-config", StateSecretName: "relay-0", Hostname: "relay-0", Port: 41641,
				StaticEndpoints: []string{"203.0.113.7:41641"},
			},
		},
	}
	if err := c.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	// Reconciled: the managed reconciler says why it cannot sync (the
	// provider config is absent).
	harness.Eventually(t, time.Minute, "the RelayConfig reconciled", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rc), rc); err != nil {
			return err
		}
		if s := rc.GetCondition(xpv2.TypeSynced); s.Status != corev1.ConditionFalse {
			return errNotYet{s}
		}
		return nil
	})
	select {
	case err := <-stopped:
		stopped <- err // for the cleanup
		t.Fatalf("the provider stopped: %v", err)
	default:
	}
}

type errNotYet struct{ c xpv2.Condition }

func (e errNotYet) Error() string { return "Synced is " + string(e.c.Status) + ": " + e.c.Message }
