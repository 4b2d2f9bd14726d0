// Package providertest runs provider-peerrelay in the test process against a
// real API server, with a DNS server on loopback and a ClusterProviderConfig
// "default" that points at it.
package providertest

import (
	"context"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/cloud"
)

// Env is a running API server with the provider's controllers.
type Env struct {
	API    *harness.APIServer
	Client client.Client // uncached, straight to the API server
	// Cache is the provider's informer cache: what it keeps in memory.
	Cache client.Reader
	DNS   *cloud.DNS
	NS    string
}

// Options tune Start.
type Options struct {
	// Poll is the provider's poll interval; default an hour, so only watches
	// deliver changes within a test.
	Poll time.Duration
	// ProviderConfig is the "default" ClusterProviderConfig's spec; its DNS
	// server is set to the test DNS server when empty.
	ProviderConfig v1alpha1.ProviderConfigSpec
	// Log receives the provider's debug logs, when set.
	Log io.Writer
	// Requests, when set, counts the provider's API requests by verb
	// (GET for gets and lists, WATCH, POST, PUT, PATCH, DELETE).
	Requests *RequestCounter
}

// RequestCounter counts API requests by HTTP method and watch, and records
// every (API group, resource, RBAC verb) the provider used.
type RequestCounter struct {
	mu   sync.Mutex
	n    map[string]int
	used map[Access]bool
}

// Access is one RBAC permission a request needed.
type Access struct{ Group, Resource, Verb string }

// Used returns every permission the provider's requests needed.
func (c *RequestCounter) Used() map[Access]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.used)
}

// Count returns the requests counted for each verb.
func (c *RequestCounter) Count() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	maps.Copy(out, c.n)
	return out
}

func (c *RequestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		verb := r.Method
		if r.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		a, ok := access(r)
		c.mu.Lock()
		if c.n == nil {
			c.n, c.used = map[string]int{}, map[Access]bool{}
		}
		c.n[verb]++
		if ok {
			c.used[a] = true
		}
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// access maps a request to the RBAC permission it needs:
// /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION/namespaces/NS/RESOURCE[...], or their cluster forms.
func access(r *http.Request) (Access, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return Access{}, false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return Access{}, false
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
	if r.Method == http.MethodGet {
		switch {
		case r.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	}
	return Access{Group: group, Resource: resource, Verb: verb}, verb != ""
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Start runs the API server, the provider and the DNS server, and creates
// namespace team-a and the "default" ClusterProviderConfig.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	api := harness.StartAPIServer(t, filepath.Join(root, "package/provider/crds"))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(api.Config)
	if o.Requests != nil {
		cfg.WrapTransport = o.Requests.wrap
	}
	mgr, err := provider.NewManager(cfg, scheme, provider.ManagerOptions{SyncPeriod: time.Hour, MetricsAddress: "0", SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	poll := o.Poll
	if poll == 0 {
		poll = time.Hour
	}
	log := logging.NewNopLogger()
	if o.Log != nil {
		log = logging.NewLogrLogger(zap.New(zap.WriteTo(o.Log), zap.UseDevMode(true), zap.Level(zapcore.DebugLevel)))
	}
	co := controller.Options{Logger: log, MaxConcurrentReconciles: 4, PollInterval: poll,
		GlobalRateLimiter: ratelimiter.NewGlobal(100), Features: &feature.Flags{}}
	if err := provider.Setup(mgr, co); err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, "the provider's manager", mgr)

	c, err := client.New(api.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{API: api, Client: c, Cache: mgr.GetCache(), DNS: cloud.StartDNS(t), NS: "team-a"}
	spec := o.ProviderConfig
	if spec.DNS == nil {
		spec.DNS = &v1alpha1.DNSConfig{Server: e.DNS.Addr}
	}
	if spec.ResolveTimeout == nil {
		spec.ResolveTimeout = &metav1.Duration{Duration: 500 * time.Millisecond}
	}
	bg := context.Background()
	if err := c.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(bg, &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	return e
}
