package crossplane

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/peerrelay/peerrelay/test/harness"
)

// writeCounter counts the writes each RelayConfig sees (every ADDED and
// MODIFIED watch event is one write that changed it), and remembers every
// XR that was ever not Responsive (Crossplane's watch circuit breaker).
type writeCounter struct {
	mu           sync.Mutex
	writes       map[string]int // namespace/name/uid
	unresponsive map[string]string
}

func (w *writeCounter) run(ctx context.Context, cfg *rest.Config) {
	dc := dynamic.NewForConfigOrDie(cfg)
	var wg sync.WaitGroup
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "relay.peerrelay.io", Version: "v1alpha1", Resource: "relayconfigs"},
		{Group: "peerrelay.io", Version: "v1alpha1", Resource: "peerrelays"},
		{Group: "legacy.peerrelay.io", Version: "v1alpha1", Resource: "xpeerrelays"},
	} {
		wg.Go(func() { w.watch(ctx, dc, gvr) })
	}
	wg.Wait()
}

// watch follows one resource everywhere, from the start, until ctx ends;
// it retries until the CRD exists.
func (w *writeCounter) watch(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource) {
	rv := ""
	for ctx.Err() == nil {
		wi, err := dc.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		for ev := range wi.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if ev.Type == watch.Bookmark {
				continue
			}
			w.record(gvr.Resource, ev.Type, u)
		}
		wi.Stop()
	}
}

func (w *writeCounter) record(resource string, t watch.EventType, u *unstructured.Unstructured) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := u.GetNamespace() + "/" + u.GetName() + "/" + string(u.GetUID())
	if resource == "relayconfigs" && (t == watch.Added || t == watch.Modified) {
		if w.writes == nil {
			w.writes = map[string]int{}
		}
		w.writes[key]++
	}
	if st, msg := condition(u, "Responsive"); st == "False" {
		if w.unresponsive == nil {
			w.unresponsive = map[string]string{}
		}
		w.unresponsive[resource+" "+key] = msg
	}
}

// relayConfigWrites returns the writes counted for the RelayConfigs in ns.
func (w *writeCounter) relayConfigWrites(ns string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, n := range w.writes {
		if strings.HasPrefix(k, ns+"/") {
			out[k] = n
		}
	}
	return out
}

func (w *writeCounter) unresponsiveXRs() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for k, v := range w.unresponsive {
		out[k] = v
	}
	return out
}

// quiet: a 3-replica PeerRelay converges in few writes per RelayConfig,
// then nothing is written while nothing changes, and no XR's watch circuit
// breaker opened during the whole run.
func (s *system) quiet(ctx context.Context, t *testing.T) {
	const ns, name, replicas = "team-q", "quiet", 3
	if out, err := s.Kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.applyPeerRelay(t, ns, name, fmt.Sprintf("replicas: %d", replicas))
	s.waitReady(ctx, t, ns, name, 90*time.Second)
	// Let what is in flight land: Crossplane's own status writes and the
	// provider's last observation.
	time.Sleep(5 * time.Second)
	converged := s.writes.relayConfigWrites(ns)
	time.Sleep(20 * time.Second)
	steady := s.writes.relayConfigWrites(ns)

	keys := make([]string, 0, len(converged))
	total := 0
	for k, n := range converged {
		keys = append(keys, k)
		total += n
	}
	sort.Strings(keys)
	if len(keys) != replicas {
		t.Fatalf("want %d RelayConfigs counted, got %v", replicas, converged)
	}
	t.Logf("writes per RelayConfig to converge (create included): %v (mean %.1f)", converged, float64(total)/float64(len(keys)))
	for _, k := range keys {
		if steady[k] != converged[k] {
			t.Errorf("RelayConfig %s written %d more times in 20 s with nothing changing", k, steady[k]-converged[k])
		}
		if converged[k] > maxWritesToConverge {
			t.Errorf("RelayConfig %s took %d writes to converge; want at most %d", k, converged[k], maxWritesToConverge)
		}
	}
	if u := s.writes.unresponsiveXRs(); len(u) > 0 {
		t.Errorf("watch circuit breaker opened (Responsive=False): %v", u)
	}
}

// maxWritesToConverge bounds the writes a RelayConfig takes from creation
// to Ready: see the closing note of the real-Crossplane issue.
const maxWritesToConverge = 6

// reportErrors logs what Crossplane and our processes logged as errors.
func (s *system) reportErrors(t *testing.T) {
	for _, p := range []*harness.Process{s.Core, s.RBAC, s.runtime.Function, s.runtime.Provider()} {
		if p == nil {
			continue
		}
		var errs []string
		for _, l := range strings.Split(p.Log.String(), "\n") {
			if strings.Contains(l, `"level":"error"`) || strings.Contains(l, "\tERROR\t") || strings.Contains(l, " ERROR ") {
				errs = append(errs, l)
			}
		}
		t.Logf("%s logged %d errors", p.Name, len(errs))
		for _, e := range errs[:min(len(errs), 40)] {
			t.Logf("  %s", e)
		}
	}
}

func runIn(dir, bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
