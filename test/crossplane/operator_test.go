package crossplane

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	tailscaleclient "tailscale.com/client/tailscale/v2"
	tsapi "tailscale.com/k8s-operator/apis/v1alpha1"
	"tailscale.com/k8s-operator/reconciler/peerrelay"
	"tailscale.com/k8s-operator/tsclient"

	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/test/harness"
)

// The Tailscale operator's PeerRelay, run beside ours for the benchmarks'
// side-by-side figures: its reconciler (tailscale.com v1.102.5,
// k8s-operator/reconciler/peerrelay) in a controller-runtime manager in
// this process, set up as the operator's main sets it up (its scheme, its
// cache confined to its namespace for Secrets and StatefulSets), on the
// same API server, node and cloud as our packages, with a fake Tailscale
// API of its own to mint its keys.

// operatorNamespace is where the operator keeps what its PeerRelays own.
const operatorNamespace = "tailscale"

var gvrOperatorPeerRelays = schema.GroupVersionResource{Group: "tailscale.com", Version: "v1alpha1", Resource: "peerrelays"}

// startOperator installs the operator's PeerRelay and ProxyClass CRDs and
// its namespace and starts its PeerRelay reconciler until the test ends.
func (s *system) startOperator(t testing.TB) {
	t.Helper()
	crds := filepath.Join(harness.ModuleDir(t, ".", "tailscale.com"), "cmd", "k8s-operator", "deploy", "crds")
	for _, f := range []string{"tailscale.com_peerrelays.yaml", "tailscale.com_proxyclasses.yaml"} {
		if out, err := s.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(crds, f)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if out, err := s.Kubectl(t, "wait", "--for=condition=Established", "crd/peerrelays.tailscale.com", "crd/proxyclasses.tailscale.com"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The StatefulSet's pods run as ServiceAccount proxies, which the
	// operator's Helm chart creates.
	if out, err := s.Kubectl(t, "create", "namespace", operatorNamespace); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := s.Kubectl(t, "-n", operatorNamespace, "create", "serviceaccount", "proxies"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	api := tailnettest.StartFakeAPI(t)
	base, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tailscaleclient.Client{
		BaseURL: base,
		Tailnet: "-",
		HTTP:    http.DefaultClient,
		Auth:    &tailscaleclient.OAuth{ClientID: "client-id", ClientSecret: "client-secret"},
	}

	inNamespace := cache.ByObject{Field: client.InNamespace(operatorNamespace).AsSelector()}
	// A user agent of its own: the benchmark counts its writes apart from
	// its own (audited).
	cfg := rest.CopyConfig(s.AdminConfig)
	cfg.UserAgent = "tailscale-operator/v1.102.5"
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 tsapi.GlobalScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:         inNamespace,
			&appsv1.StatefulSet{}:    inNamespace,
			&corev1.Pod{}:            inNamespace,
			&corev1.ConfigMap{}:      inNamespace,
			&appsv1.Deployment{}:     inNamespace,
			&corev1.ServiceAccount{}: inNamespace,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := peerrelay.NewReconciler(peerrelay.ReconcilerOptions{
		Client:             mgr.GetClient(),
		TailscaleNamespace: operatorNamespace,
		ProxyImage:         "tailscale/tailscale:v1.102.5",
		DefaultTags:        []string{"tag:k8s"},
		Clients:            tsclient.NewProvider(tsclient.Wrap(ts)),
		Logger:             zap.NewNop().Sugar(),
	})
	if err := r.Register(mgr); err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, "the operator's manager", mgr)
}

// applyOperatorPeerRelay applies one of the operator's (cluster-scoped)
// PeerRelays with the given replicas.
func (s *system) applyOperatorPeerRelay(t testing.TB, name string, replicas int) {
	t.Helper()
	manifest := fmt.Sprintf("apiVersion: tailscale.com/v1alpha1\nkind: PeerRelay\nmetadata: {name: %s}\nspec: {replicas: %d}\n", name, replicas)
	if out, err := s.KubectlIn(t, []byte(manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of the operator's PeerRelay %s: %v\n%s", name, err, out)
	}
}
