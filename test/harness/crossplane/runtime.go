package crossplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// RuntimeOptions say how our packages' processes run.
type RuntimeOptions struct {
	// ProviderArgs are added to provider-peerrelay's flags.
	ProviderArgs []string
	// Quiet runs the provider without --debug, as a platform does. The
	// function keeps it: its one line per call is how calls are counted.
	Quiet bool
}

// Runtime does for our packages what Crossplane's package runtime does for
// a Function or Provider in a real cluster, with their binaries as local
// processes: it gives each revision its TLS Secret and (for the function)
// its endpoint, binds the provider's ServiceAccount to the ClusterRole the
// RBAC manager made for its revision, starts the provider (as that
// ServiceAccount, once its CRDs exist) and reports the runtime healthy.
type Runtime struct {
	Function *harness.Process
	// FunctionAddress is where the function serves gRPC.
	FunctionAddress string

	providerBin string

	mu       sync.Mutex
	provider *harness.Process
	paused   bool
	errs     []string
}

// WhileProviderDown stops the provider, calls f, and lets the runtime start
// it again: a provider restarting, or lagging, while the world changes.
func (r *Runtime) WhileProviderDown(f func()) {
	r.mu.Lock()
	p := r.provider
	r.paused = true
	r.mu.Unlock()
	if p != nil {
		p.Stop()
	}
	defer func() {
		r.mu.Lock()
		r.provider, r.paused = nil, false
		r.mu.Unlock()
	}()
	f()
}

// Provider is the provider's process, once started.
func (r *Runtime) Provider() *harness.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.provider
}

// Errors are what went wrong in the runtime loop (retried every pass).
func (r *Runtime) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// StartRuntime starts the function (mTLS, a server certificate from
// Crossplane's CA) and the loop that serves our packages' revisions.
func (c *Crossplane) StartRuntime(t testing.TB, o RuntimeOptions) *Runtime {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ca := &corev1.Secret{}
	if err := c.Admin.Get(ctx, types.NamespacedName{Namespace: CrossplaneNamespace, Name: caSecretName}, ca); err != nil {
		t.Fatalf("cannot read Crossplane's CA: %v", err)
	}
	addr := harness.LoopbackAddress()
	host, _, _ := net.SplitHostPort(addr)
	cert, err := harness.SignServerCert(ca.Data["tls.crt"], ca.Data["tls.key"], "function-peerrelay", net.ParseIP(host))
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(c.Dir, "function-tls")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": cert.Cert, "tls.key": cert.Key, "ca.crt": cert.CA} {
		if err := os.WriteFile(filepath.Join(certs, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &Runtime{FunctionAddress: addr, providerBin: harness.Tool(t, "provider-peerrelay")}
	r.Function = harness.StartProcess(t, "function-peerrelay", harness.Tool(t, "function-peerrelay"), []string{
		"--address=" + r.FunctionAddress, "--tls-server-certs-dir=" + certs, "--metrics-address=", "--debug",
	}, nil)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := r.pass(ctx, t, c, cert, o); err != nil && ctx.Err() == nil {
				r.record(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("package runtime errors: %s", strings.Join(r.Errors(), "\n"))
		}
	})
	return r
}

// pass serves every revision once.
func (r *Runtime) pass(ctx context.Context, t testing.TB, c *Crossplane, cert *harness.ServerCert, o RuntimeOptions) error {
	var errs []error
	for _, kind := range []string{"FunctionRevision", "ProviderRevision"} {
		revs, err := c.List(ctx, "pkg.crossplane.io/v1", kind, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range revs {
			if err := r.serve(ctx, t, c, &revs[i], cert, o); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", kind, revs[i].GetName(), err))
			}
		}
	}
	return errors.Join(errs...)
}

func (r *Runtime) serve(ctx context.Context, t testing.TB, c *Crossplane, rev *unstructured.Unstructured, cert *harness.ServerCert, o RuntimeOptions) error {
	if state, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState"); state != "Active" {
		return nil
	}
	secret := rev.GetName() + "-tls-server"
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: CrossplaneNamespace},
		Data:       map[string][]byte{"tls.crt": cert.Cert, "tls.key": cert.Key, "ca.crt": cert.CA},
	}
	if err := c.Admin.Create(ctx, s); err != nil && !kerrors.IsAlreadyExists(err) {
		return err
	}
	isFunction := rev.GetKind() == "FunctionRevision"
	// The provider starts once its revision has established its CRDs, which
	// needs the TLS Secret first.
	var startErr error
	if !isFunction {
		startErr = r.startProvider(ctx, t, c, rev, o)
	}
	orig := rev.DeepCopy()
	_ = unstructured.SetNestedField(rev.Object, secret, "status", "tlsServerSecretName")
	if isFunction {
		_ = unstructured.SetNestedField(rev.Object, r.FunctionAddress, "status", "endpoint")
	}
	healthy := !r.Function.Exited()
	if !isFunction {
		p := r.Provider()
		healthy = p != nil && !p.Exited()
	}
	setCondition(rev, "RuntimeHealthy", healthy)
	if equalStatus(orig, rev) {
		return startErr
	}
	return errors.Join(startErr, c.Admin.Status().Patch(ctx, rev, client.MergeFrom(orig)))
}

// startProvider binds the provider's ServiceAccount to its revision's
// ClusterRole and starts it as that ServiceAccount once its CRDs are in.
func (r *Runtime) startProvider(ctx context.Context, t testing.TB, c *Crossplane, rev *unstructured.Unstructured, o RuntimeOptions) error {
	r.mu.Lock()
	running := r.provider != nil || r.paused
	r.mu.Unlock()
	if running {
		return nil
	}
	sa, err := c.providerServiceAccount(ctx, rev)
	if err != nil {
		return err
	}
	role := "crossplane:provider:" + rev.GetName() + ":system"
	cr := &rbacv1.ClusterRole{}
	if err := c.Admin.Get(ctx, types.NamespacedName{Name: role}, cr); err != nil {
		return fmt.Errorf("waiting for the RBAC manager's ClusterRole %s: %w", role, err)
	}
	if !grants(cr, "relayconfigs") {
		return fmt.Errorf("waiting for the RBAC manager's ClusterRole %s to grant relayconfigs", role)
	}
	crb := &rbacv1.ClusterRoleBinding{
		// Not the RBAC manager's own binding name: it owns and rewrites that one.
		ObjectMeta: metav1.ObjectMeta{Name: "external-runtime:" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: CrossplaneNamespace}},
	}
	if err := c.Admin.Create(ctx, crb); err != nil && !kerrors.IsAlreadyExists(err) {
		return err
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Admin.Get(ctx, types.NamespacedName{Name: "relayconfigs.relay.peerrelay.io"}, crd); err != nil {
		return fmt.Errorf("waiting for the provider's CRDs: %w", err)
	}
	cfg, err := harness.ServiceAccountRESTConfig(ctx, c.AdminConfig, CrossplaneNamespace, sa)
	if err != nil {
		return err
	}
	kc, err := harness.WriteKubeconfigFile(cfg, c.Dir, "provider-"+sa)
	if err != nil {
		return err
	}
	args := []string{"--metrics-address=0", "--health-address=0"}
	if !o.Quiet {
		args = append(args, "--debug")
	}
	args = append(args, o.ProviderArgs...)
	// POD_NAMESPACE: where its leader election lease is, as in a pod.
	p, err := harness.TryStartProcess(t, "provider-peerrelay (as "+sa+")", r.providerBin, args, []string{"KUBECONFIG=" + kc, "POD_NAMESPACE=" + CrossplaneNamespace})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.provider = p
	r.mu.Unlock()
	r.record(fmt.Errorf("started provider-peerrelay as ServiceAccount %s", sa))
	return nil
}

// providerServiceAccount is the ServiceAccount a package runtime would run
// the provider as: its runtime config's template name, else the revision's.
// The runtime config is an ImageConfig's, else the Provider's.
func (c *Crossplane) providerServiceAccount(ctx context.Context, rev *unstructured.Unstructured) (string, error) {
	pkg, err := c.Get(ctx, "pkg.crossplane.io/v1", "Provider", "", rev.GetLabels()["pkg.crossplane.io/package"])
	if err != nil {
		return "", fmt.Errorf("the revision's Provider: %w", err)
	}
	name, _, _ := unstructured.NestedString(pkg.Object, "spec", "runtimeConfigRef", "name")
	// An ImageConfig whose prefix matches the package gives it its runtime
	// config (the README's way for a dependency).
	image, _, _ := unstructured.NestedString(rev.Object, "spec", "image")
	ics, err := c.List(ctx, "pkg.crossplane.io/v1beta1", "ImageConfig", "")
	if err != nil {
		return "", err
	}
	for _, ic := range ics {
		ref, _, _ := unstructured.NestedString(ic.Object, "spec", "runtime", "configRef", "name")
		matches, _, _ := unstructured.NestedSlice(ic.Object, "spec", "matchImages")
		for _, m := range matches {
			if p, _ := m.(map[string]any)["prefix"].(string); ref != "" && p != "" && strings.HasPrefix(image, p) {
				name = ref
			}
		}
	}
	if name == "" {
		return rev.GetName(), nil
	}
	rc, err := c.Get(ctx, "pkg.crossplane.io/v1beta1", "DeploymentRuntimeConfig", "", name)
	if err != nil {
		return "", err
	}
	if sa, _, _ := unstructured.NestedString(rc.Object, "spec", "serviceAccountTemplate", "metadata", "name"); sa != "" {
		return sa, nil
	}
	return rev.GetName(), nil
}

func setCondition(u *unstructured.Unstructured, typ string, ok bool) {
	status, reason := "True", "HealthyPackageRevision"
	if !ok {
		status, reason = "False", "UnhealthyPackageRevision"
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for i, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			if m["status"] == status {
				return
			}
			conds = append(conds[:i], conds[i+1:]...)
			break
		}
	}
	conds = append(conds, map[string]any{
		"type": typ, "status": status, "reason": reason,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	})
	_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
}

func equalStatus(a, b *unstructured.Unstructured) bool {
	return fmt.Sprint(a.Object["status"]) == fmt.Sprint(b.Object["status"])
}

func grants(cr *rbacv1.ClusterRole, resource string) bool {
	for _, r := range cr.Rules {
		for _, res := range r.Resources {
			if res == resource {
				return true
			}
		}
	}
	return false
}

// record keeps the last 50 distinct errors.
func (r *Runtime) record(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := err.Error()
	if n := len(r.errs); n > 0 && strings.HasSuffix(r.errs[n-1], msg) {
		return
	}
	r.errs = append(r.errs, time.Now().Format(time.TimeOnly)+" "+msg)
	if len(r.errs) > 50 {
		r.errs = r.errs[1:]
	}
}
