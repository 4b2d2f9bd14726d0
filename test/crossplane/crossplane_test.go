// Package crossplane runs the system a user installs: a real Crossplane core
// with our three packages installed from a registry, as the README says, and
// PeerRelays driven through it.
package crossplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
	"github.com/peerrelay/peerrelay/test/harness/hollow"
	"github.com/peerrelay/peerrelay/test/harness/node"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

const (
	version = "v0.2.0"
	// registryName is where the README's packages live; the test's
	// registry answers as it.
	registryName = "xpkg.crossplane.io/peerrelay"

	v2API     = "peerrelay.io/v1alpha1"
	legacyAPI = "legacy.peerrelay.io/v1alpha1"
	relayAPI  = "relay.peerrelay.io/v1alpha1"
)

// system is the running Crossplane with our packages.
type system struct {
	*xpharness.Crossplane
	runtime *xpharness.Runtime
	node    *node.Node // nil on a hollow system
	tailnet *tailnet.Tailnet
	cloud   *cloud
	writes  *writeCounter
	// auditLog is kube-apiserver's log of every write (options.audit).
	auditLog string
	// release is this tree's packages, by name, when start pushed the
	// previous release instead (options.previous): pushRelease pushes them.
	release map[string][]string
	// failed are the subtests run by run that failed, named again at the
	// very end of a failed test's output (start).
	failed []string
}

func TestCrossplane(t *testing.T) {
	s := start(t, options{})
	ctx := t.Context()

	if !s.run(t, "README", func(t *testing.T) { s.readme(t, "## Install on a cluster", true) }) {
		return // nothing else can work
	}
	s.run(t, "ActivationPolicy", func(t *testing.T) { s.activationPolicy(ctx, t) })
	s.run(t, "LegacyClaim", func(t *testing.T) { s.readme(t, "### Legacy claims", true) })
	s.run(t, "Pods", func(t *testing.T) { s.pods(ctx, t) })
	s.run(t, "Reachability", func(t *testing.T) { s.reachability(ctx, t) })
	s.run(t, "Scale", func(t *testing.T) { s.scale(ctx, t) })
	s.run(t, "SpecChange", func(t *testing.T) { s.specChange(ctx, t) })
	s.run(t, "ProxyClass", func(t *testing.T) { s.proxyClass(ctx, t) })
	s.run(t, "Modes", func(t *testing.T) { s.modes(ctx, t) })
	s.run(t, "DeleteOrder", func(t *testing.T) { s.deleteOrder(ctx, t) })
	s.run(t, "BadSpec", func(t *testing.T) { s.badSpec(ctx, t) })
	s.run(t, "MinimalNoKey", func(t *testing.T) { s.minimalNoKey(ctx, t) })
	s.run(t, "TailnetUnavailable", func(t *testing.T) { s.tailnetUnavailable(ctx, t) })
	s.run(t, "Delete", func(t *testing.T) { s.deletion(ctx, t) })
	s.run(t, "DeleteNamespace", func(t *testing.T) { s.deleteNamespace(ctx, t) })
	s.run(t, "Quiet", func(t *testing.T) { s.quiet(ctx, t) })
	s.run(t, "QuietSampling", func(t *testing.T) { s.quietSampling(ctx, t) })
	s.run(t, "ProviderFromImage", func(t *testing.T) { s.providerFromImage(ctx, t) })
}

// options say which system start makes.
type options struct {
	// hollow runs no pod (test/harness/hollow), no node (system.node is
	// nil) and no tailnet: for measuring the control plane at scale.
	hollow bool
	// bench runs Crossplane and the provider as a platform does: no debug
	// logs, Crossplane's default poll interval.
	bench bool
	// audit has kube-apiserver log every write with who made it.
	audit bool
	// previous pushes the previous release's packages (make xpkg-previous)
	// rather than this tree's, which pushRelease pushes later: an upgrade.
	previous bool
}

func start(t testing.TB, o options) *system {
	t.Helper()
	var s *system
	// Registered first, so it runs last: CI shows the tail of a failed
	// run, which is otherwise the processes' logs.
	t.Cleanup(func() {
		if t.Failed() && s != nil {
			t.Logf("---- %s failed; its failed subtests: %v (their errors are above the processes' logs) ----", t.Name(), s.failed)
		}
	})
	xpkgDir := os.Getenv("PEERRELAY_XPKG_DIR")
	if xpkgDir == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		xpkgDir = filepath.Join(root, ".cache", "xpkg")
	}
	files := map[string][]string{}
	for _, p := range []string{"function", "provider", "configuration"} {
		name := p + "-peerrelay"
		files[name], _ = filepath.Glob(filepath.Join(xpkgDir, fmt.Sprintf("%s-%s*.xpkg", name, version)))
		harness.Need(t, len(files[name]) > 0, "packages not built in %s: run `make xpkg`", xpkgDir)
	}

	// The pods run on a real node (test/harness/node). The benchmarks'
	// hollow node runs no pod: there Crossplane runs packages with the
	// External runtime and the harness runs them as host processes.
	xo := xpharness.CrossplaneOptions{ExternalRuntime: o.hollow, RealNode: !o.hollow}
	if o.bench {
		xo.Quiet, xo.PollInterval = true, time.Minute
		// CROSSPLANE_ARGS tunes Crossplane core for a benchmark's run, e.g.
		// --sync-interval=5m so that its rest window sees an informer
		// resync, or --circuit-breaker-burst=400.
		xo.Args = strings.Fields(os.Getenv("CROSSPLANE_ARGS"))
	}
	if o.audit {
		xo.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	}
	if xo.ExternalRuntime {
		harness.Tool(t, "function-peerrelay")
		harness.Tool(t, "provider-peerrelay")
	}
	xp := xpharness.StartCrossplane(t, xo)
	s = &system{Crossplane: xp, cloud: &cloud{c: xp.Admin, cs: kubernetes.NewForConfigOrDie(xp.AdminConfig)}, writes: &writeCounter{}, auditLog: xo.AuditLog}
	if o.previous {
		s.release = files
		for name, paths := range previousPackages(t) {
			xp.Registry.Push(t, "peerrelay/"+name, previousVersion, paths...)
		}
	} else {
		s.pushPackages(t, files, version)
	}
	if xo.ExternalRuntime {
		ro := xpharness.RuntimeOptions{Quiet: o.bench}
		if o.bench {
			// PROVIDER_ARGS does the same for our provider, e.g.
			// --max-reconcile-rate=20.
			ro.ProviderArgs = strings.Fields(os.Getenv("PROVIDER_ARGS"))
		}
		s.runtime = xp.StartRuntime(t, ro)
	}
	// The pods run for real: containerboot and tailscaled, logging in to a
	// control server that answers as Tailscale's, on a real node.
	if o.hollow {
		hollow.Start(t, xp.AdminConfig)
	} else {
		s.node = node.Start(t, xp.AdminConfig, node.Registry{Host: xp.Registry.Host, Addr: xp.Registry.Addr, CA: xp.Registry.CA})
		// Started before the pods that log in to it: they find it by name.
		s.tailnet = tailnet.StartAsControlHost(t, s.node.ServicesIP().String())
		s.node.Publish(tailnet.ControlHost, s.node.ServicesIP(), s.tailnet.CA)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { s.cloud.run(ctx); done <- struct{}{} }()
	go func() { s.writes.run(ctx, xp.AdminConfig); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	if !o.bench {
		t.Cleanup(func() { s.reportErrors(t) })
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.Kubectl(t, "get", "-A", "-o", "yaml", "providers,providerrevisions,functions,functionrevisions,configurations,relayconfigs,peerrelays.peerrelay.io,xpeerrelays,statefulsets,deployments")
			t.Logf("---- state at failure ----\n%s", out)
			out, _ = s.Kubectl(t, "get", "pods", "-A", "-o", "wide")
			t.Logf("---- pods at failure ----\n%s", out)
			if s.node != nil {
				for pod, log := range s.node.LogsByPrefix(xpharness.CrossplaneNamespace, providerName) {
					t.Logf("---- %s log (last 32 KiB) ----\n%s", pod, harness.Tail(log, 32<<10))
				}
			}
		}
	})
	return s
}

// run runs subtest name of t, and records it in s.failed when it fails.
func (s *system) run(t *testing.T, name string, f func(t *testing.T)) bool {
	ok := t.Run(name, f)
	if !ok {
		s.failed = append(s.failed, name)
	}
	return ok
}

// pushPackages pushes packages (by name) as tag. The packages keep their
// real names: the registry answers as xpkg.crossplane.io. Each
// architecture of a package is in one index.
func (s *system) pushPackages(t testing.TB, files map[string][]string, tag string) {
	t.Helper()
	for name, paths := range files {
		s.Registry.Push(t, "peerrelay/"+name, tag, paths...)
	}
}

// readme runs every command of the README block under heading, in order,
// and, with check, checks the output it shows.
func (s *system) readme(t testing.TB, heading string, check bool) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s.readmeIn(t, root, heading, check)
}

// readmeIn is readme with the README of the tree at root, its commands'
// files (kubectl apply -f) taken from there.
func (s *system) readmeIn(t testing.TB, root, heading string, check bool) {
	for _, c := range harness.ReadmeBlock(t, root, heading) {
		for i, a := range c.Args {
			if i > 0 && c.Args[i-1] == "-f" && !filepath.IsAbs(a) {
				c.Args[i] = filepath.Join(root, a)
			}
		}
		out, args := s.runReadme(t, c)
		if !check || c.Output == nil {
			continue
		}
		// Crossplane v2.4 can re-apply a PeerRelay's stale conditions for a
		// moment right after they changed (crossplane/crossplane#7062): a
		// `get` right after `wait` may show the old ones once. The table
		// must match within 10 s; a miss before that is logged.
		diffs := tableDiff(c.Line, c.Output, strings.Split(strings.TrimSpace(out), "\n"))
		for try := 0; len(diffs) > 0 && c.Args[0] == "kubectl" && try < 10; try++ {
			t.Logf("%s: %s; again in 1 s (crossplane/crossplane#7062)", c.Line, strings.Join(diffs, "; "))
			time.Sleep(time.Second)
			var err error
			if out, err = s.Kubectl(t, args...); err != nil {
				t.Fatalf("README command %q failed: %v\n%s", c.Line, err, out)
			}
			diffs = tableDiff(c.Line, c.Output, strings.Split(strings.TrimSpace(out), "\n"))
		}
		for _, d := range diffs {
			t.Error(d)
		}
		if len(diffs) > 0 && c.Args[0] == "kubectl" {
			y, _ := s.Kubectl(t, append(args, "-o", "yaml", "--show-managed-fields")...)
			t.Logf("the object behind that table:\n%s", y)
		}
	}
}

// runReadme runs one README command and returns its output and the
// arguments it ran with; a failure fails the test.
func (s *system) runReadme(t testing.TB, c harness.ReadmeCommand) (string, []string) {
	t.Helper()
	args := make([]string, len(c.Args)-1)
	for i, a := range c.Args[1:] {
		args[i] = strings.ReplaceAll(a, "<registry>", registryName)
	}
	var out string
	var err error
	switch c.Args[0] {
	case "kubectl":
		out, err = s.Kubectl(t, args...)
	case "crossplane":
		out, err = s.CLI(t, args...)
	default:
		t.Fatalf("README command %q: the test knows kubectl and crossplane only", c.Line)
	}
	t.Logf("%s $ %s\n%s", time.Now().Format("15:04:05.000"), c.Line, out)
	if err != nil {
		t.Fatalf("README command %q failed: %v\n%s", c.Line, err, out)
	}
	return out, args
}

// tableDiff compares kubectl's table with the README's, column by column,
// except AGE, and says what differs. A README value in angle brackets
// (<node-ip>) stands for any value.
func tableDiff(cmd string, want, got []string) []string {
	w, g := columns(want), columns(got)
	if len(w) != len(g) {
		return []string{fmt.Sprintf("%s: README shows %d rows, kubectl printed %d:\n%s", cmd, len(w), len(g), strings.Join(got, "\n"))}
	}
	var diffs []string
	wantHeader, gotHeader := strings.Fields(want[0]), strings.Fields(got[0])
	if !slices.Equal(wantHeader, gotHeader) {
		diffs = append(diffs, fmt.Sprintf("%s: columns: README shows %v, kubectl printed %v", cmd, wantHeader, gotHeader))
	}
	for i := range w {
		for col, v := range w[i] {
			if strings.HasPrefix(v, "<") && strings.HasSuffix(v, ">") && g[i][col] != "" {
				continue // a placeholder: any value
			}
			if col != "AGE" && g[i][col] != v {
				diffs = append(diffs, fmt.Sprintf("%s: row %d column %s: README shows %q, kubectl printed %q", cmd, i, col, v, g[i][col]))
			}
		}
	}
	return diffs
}

// peerRelay applies a v2 PeerRelay with the given spec (YAML) and returns
// its name.
func (s *system) applyPeerRelay(t testing.TB, ns, name, spec string) {
	t.Helper()
	manifest := fmt.Sprintf("apiVersion: %s\nkind: PeerRelay\nmetadata: {name: %s, namespace: %s}\nspec:\n%s\n", v2API, name, ns, indent(spec))
	if out, err := s.KubectlIn(t, []byte(manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of PeerRelay %s/%s: %v\n%s", ns, name, err, out)
	}
}

func indent(y string) string {
	lines := strings.Split(strings.TrimSpace(y), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// waitReady waits for PeerRelayReady=True and Crossplane's Ready=True on a
// v2 PeerRelay, and returns it.
func (s *system) waitReady(ctx context.Context, t testing.TB, ns, name string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var pr *unstructured.Unstructured
	harness.Eventually(t, timeout, "PeerRelay "+ns+"/"+name+" ready", func(context.Context) error {
		var err error
		if pr, err = s.Get(ctx, v2API, "PeerRelay", ns, name); err != nil {
			return err
		}
		for _, c := range []xpv2.ConditionType{v1alpha1.ConditionPeerRelayReady, xpv2.TypeReady, xpv2.TypeSynced} {
			if st, msg := condition(pr, c); st != "True" {
				return fmt.Errorf("%s is %q: %s", c, st, msg)
			}
		}
		return nil
	})
	return pr
}

func condition(u *unstructured.Unstructured, typ xpv2.ConditionType) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == string(typ) {
			st, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			reason, _ := m["reason"].(string)
			return st, reason + ": " + msg
		}
	}
	return "", "no condition"
}

// relayPods returns the relay pods of PeerRelay ns/name by pod name, with
// their UIDs.
func (s *system) relayPods(ctx context.Context, t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	pods := &corev1.PodList{}
	if err := s.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

func (s *system) names(ctx context.Context, t *testing.T, list client.ObjectList, ns, instance string) []string {
	t.Helper()
	if err := s.Admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": instance}); err != nil {
		t.Fatal(err)
	}
	var out []string
	switch l := list.(type) {
	case *appsv1.StatefulSetList:
		for _, o := range l.Items {
			out = append(out, o.Name)
		}
	case *corev1.ServiceList:
		for _, o := range l.Items {
			out = append(out, o.Name)
		}
	}
	sort.Strings(out)
	return out
}

// scale: 2→3→1 on the README's PeerRelay. Running replicas keep their
// pods (same UIDs); a removed replica's objects go.
func (s *system) scale(ctx context.Context, t *testing.T) {
	const ns, name = "team-a", "my-relay"
	before := s.relayPods(ctx, t, ns, name)
	if len(before) != 2 {
		t.Fatalf("want the README's 2 relay pods, got %v", before)
	}
	for _, n := range []int{3, 1} {
		if out, err := s.Kubectl(t, "-n", ns, "patch", "peerrelay", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)); err != nil {
			t.Fatalf("scale to %d: %v\n%s", n, err, out)
		}
		harness.Eventually(t, 90*time.Second, fmt.Sprintf("%d replicas", n), func(context.Context) error {
			pr, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
			if err != nil {
				return err
			}
			if st, msg := condition(pr, v1alpha1.ConditionPeerRelayReady); st != "True" || !strings.Contains(msg, fmt.Sprintf("all %d replicas", n)) {
				return fmt.Errorf("PeerRelayReady %s: %s", st, msg)
			}
			if got, _, _ := unstructured.NestedString(pr.Object, "status", "readyReplicas"); got != fmt.Sprintf("%d/%d", n, n) {
				return fmt.Errorf("status.readyReplicas (REPLICAS) %q", got)
			}
			pods := s.relayPods(ctx, t, ns, name)
			if len(pods) != n {
				return fmt.Errorf("%d pods: %v", len(pods), pods)
			}
			var sts []string
			for i := range n {
				sts = append(sts, fmt.Sprintf("%s-%d", name, i))
			}
			if got := s.names(ctx, t, &appsv1.StatefulSetList{}, ns, name); !slices.Equal(got, sts) {
				return fmt.Errorf("StatefulSets %v, want %v", got, sts)
			}
			rcs, err := s.List(ctx, relayAPI, "RelayConfig", ns)
			if err != nil {
				return err
			}
			if len(rcs) != n {
				return fmt.Errorf("%d RelayConfigs", len(rcs))
			}
			return nil
		})
		after := s.relayPods(ctx, t, ns, name)
		for pod, uid := range before {
			if newUID, ok := after[pod]; ok && newUID != uid {
				t.Errorf("scaling to %d recreated running pod %s (uid %s → %s)", n, pod, uid, newUID)
			}
		}
		if _, ok := after[name+"-0-0"]; !ok {
			t.Errorf("scaling to %d took replica 0's pod down: %v", n, after)
		}
		before = after
	}
}

// specChange: a new port and Service annotations reach the Services and the
// config the relays read.
func (s *system) specChange(ctx context.Context, t *testing.T) {
	const ns, name = "team-a", "changed"
	s.applyPeerRelay(t, ns, name, "replicas: 1\nauthKeySecretRef: {name: tailscale-auth}")
	s.waitReady(ctx, t, ns, name, 90*time.Second)
	// A replica's first transitions are events on the PeerRelay (later ones
	// may fall to client-go's per-object event spam filter: README).
	harness.Eventually(t, 30*time.Second, "an event saying replica 0's load balancer has an address", func(ctx context.Context) error {
		return s.eventContains(ctx, ns, name, "replica 0: its load balancer has an address")
	})
	if out, err := s.Kubectl(t, "-n", ns, "patch", "peerrelay", name, "--type=merge", "-p",
		`{"spec":{"port":7001,"service":{"annotations":{"example.com/team":"net"}}}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	harness.Eventually(t, 60*time.Second, "port and annotations applied", func(context.Context) error {
		svc := &corev1.Service{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, svc); err != nil {
			return err
		}
		if p := svc.Spec.Ports[0].Port; p != 7001 {
			return fmt.Errorf("Service port %d", p)
		}
		if a := svc.Annotations["example.com/team"]; a != "net" {
			return fmt.Errorf("Service annotations %v", svc.Annotations)
		}
		cfg := &corev1.Secret{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0-config"}, cfg); err != nil {
			return err
		}
		for _, v := range cfg.Data {
			if !strings.Contains(string(v), `"RelayServerPort":7001`) || !strings.Contains(string(v), `203.0.113.10:7001`) {
				return fmt.Errorf("config: %s", v)
			}
		}
		pr, err := s.Get(ctx, v2API, "PeerRelay", ns, name)
		if err != nil {
			return err
		}
		eps, _, _ := unstructured.NestedSlice(pr.Object, "status", "endpoints")
		if len(eps) != 1 || fmt.Sprint(eps[0].(map[string]any)["port"]) != "7001" {
			return fmt.Errorf("status.endpoints %v", eps)
		}
		return nil
	})
}

// proxyClass: spec.proxyClass with no ProxyClass CRD composes with the
// defaults and says why; once the Tailscale operator's CRD and the
// ProxyClass exist, the pods get its settings.
func (s *system) proxyClass(ctx context.Context, t *testing.T) {
	const ns, name = "team-a", "edge-relay"
	s.applyPeerRelay(t, ns, name, "replicas: 1\nproxyClass: edge\nauthKeySecretRef: {name: tailscale-auth}")
	s.waitReady(ctx, t, ns, name, 90*time.Second)
	harness.Eventually(t, 30*time.Second, "a warning naming the missing CRD", func(context.Context) error {
		return s.eventContains(ctx, ns, name, "the ProxyClass CRD (proxyclasses.tailscale.com, from the Tailscale operator) is not installed")
	})

	crd := filepath.Join(harness.ModuleDir(t, ".", "tailscale.com"), "cmd", "k8s-operator", "deploy", "crds", "tailscale.com_proxyclasses.yaml")
	if out, err := s.Kubectl(t, "apply", "--server-side", "-f", crd); err != nil {
		t.Fatalf("installing the ProxyClass CRD: %v\n%s", err, out)
	}
	harness.Eventually(t, 30*time.Second, "ProxyClass CRD established", func(context.Context) error {
		_, err := s.Kubectl(t, "wait", "--for=condition=Established", "crd/proxyclasses.tailscale.com", "--timeout=1s")
		return err
	})
	// The PeerRelay sees the new CRD at its next reconcile (a CRD that did
	// not exist could not be watched), or at once when touched, as here.
	s.touch(t, ns, name, "1")
	harness.Eventually(t, 60*time.Second, "a warning naming the missing ProxyClass", func(context.Context) error {
		return s.eventContains(ctx, ns, name, `ProxyClass "edge" named by spec.proxyClass does not exist`)
	})
	// A ProxyClass is the platform team's grant: one that does not list
	// the namespace in peerrelay.io/namespaces is not applied.
	pc := "apiVersion: tailscale.com/v1alpha1\nkind: ProxyClass\nmetadata: {name: edge}\nspec:\n  statefulSet:\n    pod:\n      nodeSelector: {node-role: edge}\n"
	if out, err := s.KubectlIn(t, []byte(pc), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.touch(t, ns, name, "2")
	harness.Eventually(t, 60*time.Second, "a warning that the ProxyClass is not offered to the namespace", func(context.Context) error {
		return s.eventContains(ctx, ns, name, `ProxyClass "edge" named by spec.proxyClass is not offered to namespace `+ns)
	})
	pc = "apiVersion: tailscale.com/v1alpha1\nkind: ProxyClass\nmetadata: {name: edge, annotations: {peerrelay.io/namespaces: " + ns + "}}\nspec:\n  statefulSet:\n    pod:\n      nodeSelector: {node-role: edge}\n"
	if out, err := s.KubectlIn(t, []byte(pc), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.touch(t, ns, name, "3")
	harness.Eventually(t, 60*time.Second, "the ProxyClass's nodeSelector on the relay pods", func(context.Context) error {
		sts := &appsv1.StatefulSet{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, sts); err != nil {
			return err
		}
		if got := sts.Spec.Template.Spec.NodeSelector["node-role"]; got != "edge" {
			return fmt.Errorf("nodeSelector %v", sts.Spec.Template.Spec.NodeSelector)
		}
		return nil
	})
	// A ProxyClass change, with nothing touched, reaches the StatefulSet
	// within seconds: Crossplane watches the resources a function requires.
	pc = "apiVersion: tailscale.com/v1alpha1\nkind: ProxyClass\nmetadata: {name: edge, annotations: {peerrelay.io/namespaces: " + ns + "}}\nspec:\n  statefulSet:\n    labels: {team: net}\n    pod:\n      nodeSelector: {node-role: edge-2}\n"
	if out, err := s.KubectlIn(t, []byte(pc), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	changed := time.Now()
	harness.Eventually(t, 30*time.Second, "the changed ProxyClass on the StatefulSet, untouched", func(context.Context) error {
		sts := &appsv1.StatefulSet{}
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-0"}, sts); err != nil {
			return err
		}
		if sts.Spec.Template.Spec.NodeSelector["node-role"] != "edge-2" || sts.Labels["team"] != "net" {
			return fmt.Errorf("nodeSelector %v, labels %v", sts.Spec.Template.Spec.NodeSelector, sts.Labels)
		}
		return nil
	})
	t.Logf("a ProxyClass change reached the StatefulSet in %s", time.Since(changed).Round(100*time.Millisecond))
}

// touch annotates a PeerRelay, which makes Crossplane reconcile it now.
func (s *system) touch(t *testing.T, ns, name, v string) {
	t.Helper()
	if out, err := s.Kubectl(t, "-n", ns, "annotate", "--overwrite", "peerrelay", name, "test.peerrelay.io/touch="+v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// eventContains looks for an event on PeerRelay ns/name whose message holds
// msg.
func (s *system) eventContains(ctx context.Context, ns, name, msg string) error {
	evs := &corev1.EventList{}
	if err := s.Admin.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return err
	}
	var seen []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name != name || e.InvolvedObject.Kind != "PeerRelay" {
			continue
		}
		if strings.Contains(e.Message, msg) {
			return nil
		}
		seen = append(seen, e.Reason+": "+e.Message)
	}
	return fmt.Errorf("no event says %q; events: %v", msg, seen)
}

// badSpec: a legacy claim whose spec the function refuses gets a clear
// condition, and nothing is composed.
func (s *system) badSpec(ctx context.Context, t *testing.T) {
	const ns, name = "team-b", "bad-relay"
	claim := fmt.Sprintf("apiVersion: %s\nkind: PeerRelay\nmetadata: {name: %s, namespace: %s}\nspec:\n  replicas: 1\n  staticEndpoints: [\"not-an-address\"]\n", legacyAPI, name, ns)
	if out, err := s.KubectlIn(t, []byte(claim), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	harness.Eventually(t, 60*time.Second, "the claim says what is wrong", func(context.Context) error {
		c, err := s.Get(ctx, legacyAPI, "PeerRelay", ns, name)
		if err != nil {
			return err
		}
		st, msg := condition(c, v1alpha1.ConditionPeerRelayReady)
		if st != "False" || !strings.HasPrefix(msg, string(v1alpha1.ReasonSpecInvalid)+": ") || !strings.Contains(msg, "spec.staticEndpoints[0]") {
			return fmt.Errorf("PeerRelayReady %q %q", st, msg)
		}
		return nil
	})
	if got := s.names(ctx, t, &appsv1.StatefulSetList{}, ns, name); len(got) != 0 {
		t.Errorf("a refused spec composed StatefulSets %v", got)
	}
	if got := s.names(ctx, t, &corev1.ServiceList{}, ns, name); len(got) != 0 {
		t.Errorf("a refused spec composed Services %v", got)
	}
	if out, err := s.Kubectl(t, "-n", ns, "delete", "peerrelayclaim", name, "--timeout=60s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// deletion: deleting the v2 PeerRelay and the legacy claim leaves nothing
// behind.
func (s *system) deletion(ctx context.Context, t *testing.T) {
	for _, d := range []struct{ ns, kind, name string }{
		{"team-a", "peerrelay", "my-relay"},
		{"team-a", "peerrelay", "edge-relay"},
		{"team-a", "peerrelay", "changed"},
		{"team-b", "peerrelayclaim", "my-relay"},
	} {
		if out, err := s.Kubectl(t, "-n", d.ns, "delete", d.kind, d.name, "--timeout=60s"); err != nil {
			t.Fatalf("kubectl delete %s %s: %v\n%s", d.kind, d.name, err, out)
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		s.waitEmpty(ctx, t, ns, 60*time.Second)
	}
	if xrs, _ := s.List(ctx, legacyAPI, "XPeerRelay", ""); len(xrs) != 0 {
		t.Errorf("XPeerRelays left: %d", len(xrs))
	}
}

// waitEmpty waits until namespace ns holds nothing we compose.
func (s *system) waitEmpty(ctx context.Context, t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, "nothing left in "+ns, func(context.Context) error {
		var left []string
		for _, k := range []struct{ api, kind string }{
			{relayAPI, "RelayConfig"}, {relayAPI, "ProviderConfigUsage"}, {"apps/v1", "StatefulSet"},
			{"v1", "Service"}, {"rbac.authorization.k8s.io/v1", "Role"},
		} {
			items, err := s.List(ctx, k.api, k.kind, ns)
			if err != nil {
				return err
			}
			for _, i := range items {
				left = append(left, k.kind+"/"+i.GetName()+fmt.Sprint(i.GetFinalizers()))
			}
		}
		secrets := &corev1.SecretList{}
		if err := s.Admin.List(ctx, secrets, client.InNamespace(ns), client.HasLabels{"app.kubernetes.io/instance"}); err != nil {
			return err
		}
		for _, sec := range secrets.Items {
			left = append(left, "Secret/"+sec.Name)
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}

// deleteNamespace: a namespace holding a ready PeerRelay is deleted within
// 60 s, finalizers and all, even when the provider was down while the
// namespace controller removed everything else (the RelayConfigs'
// ProviderConfigUsages among it, which a terminating namespace refuses to
// take again).
func (s *system) deleteNamespace(ctx context.Context, t *testing.T) {
	const ns, name = "team-c", "doomed"
	if err := s.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	s.applyPeerRelay(t, ns, name, "replicas: 2")
	s.waitComposed(ctx, t, ns, name, 2)
	s.whileProviderDown(func() {
		if err := s.Admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "only the RelayConfigs (finalizers) left in "+ns, func(context.Context) error {
			pcus, err := s.List(ctx, relayAPI, "ProviderConfigUsage", ns)
			if err != nil {
				return err
			}
			if len(pcus) > 0 {
				return fmt.Errorf("%d ProviderConfigUsages left", len(pcus))
			}
			return nil
		})
	})
	harness.Eventually(t, 60*time.Second, "namespace "+ns+" gone", func(context.Context) error {
		n := &corev1.Namespace{}
		err := s.Admin.Get(ctx, types.NamespacedName{Name: ns}, n)
		if kerrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rcs, _ := s.List(ctx, relayAPI, "RelayConfig", ns)
		var left []string
		for _, rc := range rcs {
			left = append(left, rc.GetName()+fmt.Sprint(rc.GetFinalizers()))
		}
		return fmt.Errorf("namespace %s, RelayConfigs left %v, conditions %v", n.Status.Phase, left, n.Status.Conditions)
	})
}

// waitComposed waits until a PeerRelay's RelayConfigs are ready.
func (s *system) waitComposed(ctx context.Context, t *testing.T, ns, name string, replicas int) {
	t.Helper()
	harness.Eventually(t, 90*time.Second, "RelayConfigs of "+ns+"/"+name+" ready", func(context.Context) error {
		rcs, err := s.List(ctx, relayAPI, "RelayConfig", ns)
		if err != nil {
			return err
		}
		ready := 0
		for i := range rcs {
			if st, _ := condition(&rcs[i], "Ready"); st == "True" {
				ready++
			}
		}
		if ready != replicas {
			return fmt.Errorf("%d of %d RelayConfigs ready", ready, replicas)
		}
		return nil
	})
}
