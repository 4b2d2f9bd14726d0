package crossplane

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// dashboardPanel is one panel of docs/grafana-dashboard.json and the
// queries of its targets.
type dashboardPanel struct {
	Title   string
	Targets []struct{ Expr string } `json:"targets"`
}

// dashboardPanels reads docs/grafana-dashboard.json's panels.
func dashboardPanels(t *testing.T) []dashboardPanel {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	return d.Panels
}

// dashboardMetrics returns the metric names docs/grafana-dashboard.json
// queries that start with one of prefixes: the system tests check that
// the pods they scrape export each of them, so the dashboard never shows
// a metric nothing serves.
func dashboardMetrics(t *testing.T, prefixes ...string) []string {
	t.Helper()
	name := regexp.MustCompile(`\b(` + strings.Join(prefixes, "|") + `)[a-z_]*`)
	var out []string
	for _, p := range dashboardPanels(t) {
		for _, target := range p.Targets {
			out = append(out, name.FindAllString(target.Expr, -1)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// scrapeMetrics returns what a pod serves at /metrics on port.
func scrapeMetrics(ctx context.Context, podIP string, port int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(podIP, strconv.Itoa(port))+"/metrics", nil)
	if err != nil {
		return "", err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = rsp.Body.Close() }()
	b, err := io.ReadAll(rsp.Body)
	return string(b), err
}

// missing returns the names that no line of a scrape starts with.
func missing(names []string, scrape string) []string {
	var out []string
	for _, n := range names {
		if !strings.Contains(scrape, "\n"+n+"{") && !strings.Contains(scrape, "\n"+n+" ") {
			out = append(out, n)
		}
	}
	return out
}

// installPrometheusOperatorCRDs installs the Prometheus Operator's CRDs,
// generated from its API module (make tools), and waits for them.
func (s *system) installPrometheusOperatorCRDs(t *testing.T) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(root, ".cache", "prometheus-operator-crds", "v*"))
	harness.Need(t, len(dirs) == 1, "the Prometheus Operator CRDs are not generated: run `make tools`")
	crd := filepath.Join(dirs[0], "monitoring.coreos.com_podmonitors.yaml")
	if out, err := s.Kubectl(t, "apply", "--server-side", "-f", crd); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := s.Kubectl(t, "wait", "--for=condition=Established", "crd/podmonitors.monitoring.coreos.com", "--timeout=30s"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// checkPodMonitor: the PeerRelay's PodMonitor, accepted by the real CRD's
// schema, selects exactly its relay pods, each of which has the port it
// scrapes (which relayMetrics scrapes too).
func (s *system) checkPodMonitor(ctx context.Context, t *testing.T, ns, name string, replicas int) {
	t.Helper()
	var pm *unstructured.Unstructured
	harness.Eventually(t, time.Minute, "the PeerRelay's PodMonitor", func(context.Context) error {
		var err error
		pm, err = s.Get(ctx, "monitoring.coreos.com/v1", "PodMonitor", ns, name)
		return err
	})
	if pm.GetLabels()["release"] != "prometheus" {
		t.Errorf("PodMonitor labels %v, want the spec's release: prometheus", pm.GetLabels())
	}
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	pods := &corev1.PodList{}
	if err := s.Admin.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
		t.Fatal(err)
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		t.Fatalf("podMetricsEndpoints %v, want one", eps)
	}
	port := eps[0].(map[string]any)["port"]
	var named int
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == port {
					named++
				}
			}
		}
	}
	if len(pods.Items) != replicas || named != replicas {
		t.Errorf("the PodMonitor selects %d pods, %d with a port named %v; want the %d relay pods", len(pods.Items), named, port, replicas)
	}
}
