// Package crossplane runs Crossplane as a user's cluster does, without
// nodes: kube-controller-manager, Crossplane core and its RBAC manager as
// their own ServiceAccounts, an OCI registry answering as the packages'
// real host, the cluster DNS core resolves functions with, and (for a
// hollow node) the External package runtime played with host processes.
package crossplane

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// Crossplane's namespace and the names a Helm install gives its parts.
const (
	CrossplaneNamespace = "crossplane-system"
	crossplaneSA        = "crossplane"
	rbacManagerSA       = "rbac-manager"
	caSecretName        = "crossplane-root-ca"
	clientTLSSecretName = "crossplane-tls-client"
	serverTLSSecretName = "crossplane-tls-server"
	webhookServiceName  = "crossplane-webhooks"
	crossplaneModule    = "github.com/crossplane/crossplane/v2"
)

// Crossplane is a Crossplane core running against a real kube-apiserver with
// no nodes: kube-controller-manager (garbage collector, StatefulSets,
// namespaces, ServiceAccounts, ClusterRole aggregation), Crossplane core and
// its RBAC manager each as their own ServiceAccount with the RBAC Crossplane's
// Helm chart gives them, and a loopback registry holding our packages.
// Core serves its webhooks, as it does by default: the API server calls
// the Usage webhook (webhook.go), and Usages are reconciled only then.
// Packages run in Crossplane's default package runtime: a Deployment per
// revision, whose pods the test node runs from the package's image; with
// ExternalRuntime, Runtime (runtime.go) plays that part with host processes.
type Crossplane struct {
	API *harness.APIServer
	// Admin is a cluster-admin client: the test acting as a user.
	Admin       client.Client
	AdminConfig *rest.Config
	// Kubeconfig is the admin kubeconfig kubectl and the Crossplane CLI use.
	Kubeconfig string
	Registry   *Registry
	Dir        string

	dns *clusterDNS

	KCM, Core, RBAC *harness.Process
}

// CrossplaneOptions tune StartCrossplane.
type CrossplaneOptions struct {
	// PollInterval is Crossplane's --poll-interval; default 15s.
	PollInterval time.Duration
	// Args are added to Crossplane core's flags: a benchmark's tuning
	// (--sync-interval, --circuit-breaker-burst, ...).
	Args []string
	// Quiet runs Crossplane without --debug, as a platform does: for
	// benchmarks, where debug logging would be counted as Crossplane's cost.
	Quiet bool
	// ExternalRuntime runs Crossplane with --package-runtime=External, for
	// a hollow node that runs no pod: StartRuntime then runs the function
	// and the provider as host processes.
	ExternalRuntime bool
	// RegistryHost is the registry the packages are named under; the test's
	// registry answers as it. Default xpkg.crossplane.io.
	RegistryHost string
	// AuditLog, if set, is where kube-apiserver logs every write
	// (harness.APIServerOptions.AuditLog).
	AuditLog string
	// RealNode readies the control plane for a real node
	// (test/harness/node): the API server leaves the kubernetes Service to
	// it, the controller manager keeps EndpointSlices for its kube-proxy,
	// and kube-scheduler binds pods to it.
	RealNode bool
}

// StartCrossplane starts everything but our packages; it stops when the test
// ends. Its cluster is dual-stack (IPv4 first), as a cluster that offers
// IPv6 load balancers is.
func StartCrossplane(t testing.TB, o CrossplaneOptions) *Crossplane {
	t.Helper()
	for _, tool := range []string{"kube-controller-manager", "crossplane", "helm", "crank"} {
		harness.Tool(t, tool)
	}
	if o.PollInterval == 0 {
		o.PollInterval = 15 * time.Second
	}
	if o.RegistryHost == "" {
		o.RegistryHost = "xpkg.crossplane.io"
	}
	ctx := context.Background()
	c := &Crossplane{API: harness.StartAPIServerWith(t, harness.APIServerOptions{Pods: true, DualStack: true, AuditLog: o.AuditLog, RealNode: o.RealNode}), Dir: t.TempDir()}
	c.AdminConfig = c.API.Config
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var err error
	if c.Admin, err = client.New(c.AdminConfig, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	c.Kubeconfig = harness.WriteKubeconfig(t, c.AdminConfig, c.Dir, "admin")

	// root-ca-cert-publisher writes kube-root-ca.crt into every namespace:
	// the ca.crt of a pod's kube-api-access volume.
	rootCA := filepath.Join(c.Dir, "cluster-ca.crt")
	if err := os.WriteFile(rootCA, c.API.ClusterCA, 0o600); err != nil {
		t.Fatal(err)
	}
	controllers := "garbagecollector,statefulset,deployment,replicaset,namespace,clusterrole-aggregation,serviceaccount,root-ca-cert-publisher,disruption"
	if o.RealNode {
		// nodelifecycle lifts the not-ready taint a kubelet registers with.
		controllers += ",endpointslice,endpointslicemirroring,nodelifecycle"
		harness.StartProcess(t, "kube-scheduler", harness.Tool(t, "kube-scheduler"), []string{
			"--kubeconfig=" + c.Kubeconfig, "--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false", "--secure-port=0",
		}, nil)
	}
	c.KCM = harness.StartProcess(t, "kube-controller-manager", harness.Tool(t, "kube-controller-manager"), []string{
		"--kubeconfig=" + c.Kubeconfig, "--root-ca-file=" + rootCA,
		// disruption keeps each PodDisruptionBudget's allowed disruptions,
		// which the eviction API (a node drain) honours.
		"--controllers=" + controllers,
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--concurrent-statefulset-syncs=10",
	}, nil)

	if err := c.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CrossplaneNamespace}}); err != nil {
		t.Fatal(err)
	}
	crossplaneDir := harness.ModuleDir(t, crossplaneWrapper(), crossplaneModule)
	c.applyChartRBAC(t, filepath.Join(crossplaneDir, "cluster", "charts", "crossplane"))

	// Crossplane's ClusterRole is aggregated by kube-controller-manager.
	harness.Eventually(t, 60*time.Second, "ClusterRole crossplane is aggregated", func(context.Context) error {
		cr := &rbacv1.ClusterRole{}
		if err := c.Admin.Get(ctx, types.NamespacedName{Name: "crossplane"}, cr); err != nil {
			return err
		}
		if len(cr.Rules) == 0 {
			return fmt.Errorf("no rules yet")
		}
		return nil
	})

	core := harness.WriteKubeconfig(t, harness.ServiceAccountConfig(ctx, t, c.AdminConfig, CrossplaneNamespace, crossplaneSA), c.Dir, crossplaneSA)
	rbacKC := harness.WriteKubeconfig(t, harness.ServiceAccountConfig(ctx, t, c.AdminConfig, CrossplaneNamespace, rbacManagerSA), c.Dir, rbacManagerSA)
	env := []string{"KUBECONFIG=" + core, "POD_NAMESPACE=" + CrossplaneNamespace, "POD_SERVICE_ACCOUNT=" + crossplaneSA}

	// crossplane core init, as its init container runs: CRDs, the lock, the
	// CA and Crossplane's client certificate. Right after the CRDs apply, the
	// first try can fail ("no matches for kind Lock"); it is retried.
	// With webhooks on, as Crossplane's Helm chart runs it, init also
	// makes the webhook's server certificate and installs the
	// ValidatingWebhookConfiguration that enforces Usages.
	webhookPort := startWebhookService(t, c.Admin)
	initEnv := append(env, "CRDS_PATH="+filepath.Join(crossplaneDir, "cluster", "crds"),
		"TLS_CA_SECRET_NAME="+caSecretName, "TLS_CLIENT_SECRET_NAME="+clientTLSSecretName,
		"TLS_SERVER_SECRET_NAME="+serverTLSSecretName,
		"WEBHOOK_CONFIGS_PATH="+filepath.Join(crossplaneDir, "cluster", "webhookconfigurations"),
		"WEBHOOK_SERVICE_NAME="+webhookServiceName, "WEBHOOK_SERVICE_NAMESPACE="+CrossplaneNamespace,
		fmt.Sprintf("WEBHOOK_SERVICE_PORT=%d", webhookPort))
	harness.Eventually(t, 90*time.Second, "crossplane core init", func(context.Context) error {
		cmd := exec.Command(crossplaneBin(t), "core", "init", "--activation=*")
		cmd.Env = append(os.Environ(), initEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, harness.Tail(string(out), 2000))
		}
		return nil
	})
	clientCerts := filepath.Join(c.Dir, "tls-client")
	c.copySecret(t, clientTLSSecretName, clientCerts)
	serverCerts := filepath.Join(c.Dir, "tls-server")
	c.copySecret(t, serverTLSSecretName, serverCerts)

	// The RBAC manager serves metrics on :8080 and has no flag to move it.
	if l, err := net.Listen("tcp", ":8080"); err != nil {
		t.Fatalf("crossplane rbac start needs port 8080, which is in use (a process left from an earlier run?): %v", err)
	} else {
		_ = l.Close()
	}
	c.RBAC = harness.StartProcess(t, "crossplane rbac", crossplaneBin(t), []string{
		"rbac", "start", "--provider-clusterrole=crossplane:allowed-provider-permissions",
	}, []string{"KUBECONFIG=" + rbacKC, "POD_NAMESPACE=" + CrossplaneNamespace})

	// The registry answers as the packages' real host, found through the
	// cluster DNS Crossplane core resolves with, and trusted through its CA
	// bundle flag, as a private registry is.
	c.Registry = StartRegistry(t, o.RegistryHost)
	c.dns = startClusterDNS(t, c.Admin, c.Dir)
	regIP, _, _ := net.SplitHostPort(c.Registry.Addr)
	c.dns.Set(o.RegistryHost, regIP)
	caBundle := filepath.Join(c.Dir, "registry-ca.crt")
	if err := os.WriteFile(caBundle, c.Registry.CA, 0o644); err != nil {
		t.Fatal(err)
	}

	cache := filepath.Join(c.Dir, "xpkg-cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	debug := []string{"--debug"}
	if o.Quiet {
		debug = nil
	}
	args := []string{
		"core", "start", fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--xpkg-cache-dir=" + cache, "--ca-bundle-path=" + caBundle,
		// Port 0: any free port; nothing here reads them.
		"--metrics-port=0", "--health-probe-port=0",
		"--poll-interval=" + o.PollInterval.String(),
	}
	args = append(args, o.Args...)
	if o.ExternalRuntime {
		args = append(args, "--package-runtime=External")
	}
	bin, args := inMountNamespace(c.dns.resolvConf, crossplaneBin(t), append(args, debug...))
	c.Core = harness.StartProcess(t, "crossplane core", bin, args,
		append(env, "TLS_CLIENT_CERTS_DIR="+clientCerts, "TLS_CLIENT_SECRET_NAME="+clientTLSSecretName,
			"TLS_SERVER_CERTS_DIR="+serverCerts, "TLS_SERVER_SECRET_NAME="+serverTLSSecretName))
	waitWebhook(t, c.Core, webhookPort)
	return c
}

// crossplaneWrapper is the module (relative to the repository root) whose
// Crossplane the system runs: tools/crossplane, or the version
// PEERRELAY_CROSSPLANE_VERSION names, built by hack/crossplane-version.sh
// into .cache/matrix/<version> (make test-matrix).
func crossplaneWrapper() string {
	if v := os.Getenv("PEERRELAY_CROSSPLANE_VERSION"); v != "" {
		return filepath.Join(".cache", "matrix", v)
	}
	return "tools/crossplane"
}

func crossplaneBin(t testing.TB) string {
	t.Helper()
	if os.Getenv("PEERRELAY_CROSSPLANE_VERSION") == "" {
		return harness.Tool(t, "crossplane")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, crossplaneWrapper(), "crossplane")
	_, err = os.Stat(bin)
	harness.Need(t, err == nil, "%s: run hack/crossplane-version.sh", bin)
	return bin
}

// applyChartRBAC renders the ClusterRoles, bindings and ServiceAccounts of
// Crossplane's own Helm chart (from the module cache) and applies them.
func (c *Crossplane) applyChartRBAC(t testing.TB, chart string) {
	t.Helper()
	args := []string{"template", "crossplane", chart, "--namespace", CrossplaneNamespace}
	for _, f := range []string{
		"clusterrole.yaml", "clusterrolebinding.yaml", "serviceaccount.yaml",
		"rbac-manager-clusterrole.yaml", "rbac-manager-clusterrolebinding.yaml", "rbac-manager-serviceaccount.yaml",
		"rbac-manager-managed-clusterroles.yaml", "rbac-manager-allowed-provider-permissions.yaml",
	} {
		args = append(args, "--show-only", "templates/"+f)
	}
	cmd := exec.Command(harness.Tool(t, "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(c.Dir, "helm"), "HELM_CONFIG_HOME="+filepath.Join(c.Dir, "helm"))
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template of Crossplane's chart: %v", err)
	}
	if out, err := c.KubectlIn(t, rendered, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying Crossplane's RBAC: %v\n%s", err, out)
	}
}

// copySecret writes a Secret's keys as files in dir.
func (c *Crossplane) copySecret(t testing.TB, name, dir string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Admin.Get(context.Background(), types.NamespacedName{Namespace: CrossplaneNamespace, Name: name}, s); err != nil {
		t.Fatalf("cannot read Secret %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Kubectl runs kubectl as cluster admin from the repository root, as a user
// following the README would, and returns its combined output.
func (c *Crossplane) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return c.KubectlIn(t, nil, args...)
}

// KubectlIn is Kubectl with stdin.
func (c *Crossplane) KubectlIn(t testing.TB, stdin []byte, args ...string) (string, error) {
	t.Helper()
	return c.run(t, stdin, harness.Tool(t, "kubectl"), args...)
}

// CLI runs the Crossplane CLI (crank) as cluster admin from the repository
// root.
func (c *Crossplane) CLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return c.run(t, nil, harness.Tool(t, "crank"), args...)
}

func (c *Crossplane) run(t testing.TB, stdin []byte, bin string, args ...string) (string, error) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // well within go test's own timeout
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Get reads an object of any kind as unstructured.
func (c *Crossplane) Get(ctx context.Context, apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, c.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
}

// List lists objects of any kind as unstructured (in ns, or everywhere).
func (c *Crossplane) List(ctx context.Context, apiVersion, kind, ns string, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	err := c.Admin.List(ctx, l, opts...)
	if kerrors.IsNotFound(err) || isNoMatch(err) {
		return nil, nil
	}
	return l.Items, err
}

func isNoMatch(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no matches for kind")
}
