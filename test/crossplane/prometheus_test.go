package crossplane

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
	xpharness "github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// prometheus starts a real Prometheus with docs/alerts' rules, each one's
// `for` cut to 5 s, scraping the provider's pods and the replicas of
// PeerRelay ns/name (metrics on) as a PodMonitor would label them.
func (s *system) prometheus(ctx context.Context, t *testing.T, ns, name string, replicas int) *harness.Prometheus {
	t.Helper()
	_, rules := harness.AlertRules(t)
	rules = regexp.MustCompile(`(?m)^(\s*for:) \S+$`).ReplaceAll(rules, []byte("$1 5s"))
	// The provider's series name the namespace of the replica they are
	// about: its job keeps them (honorLabels, docs/alerts).
	prom := harness.StartPrometheus(t, rules, harness.ScrapeJob{Name: "provider-peerrelay", HonorLabels: true}, harness.ScrapeJob{Name: "relays"})

	var providers []harness.Target
	pods := &corev1.PodList{}
	if err := s.Admin.List(ctx, pods, client.InNamespace(xpharness.CrossplaneNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, providerName) && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			providers = append(providers, harness.Target{Address: p.Status.PodIP + ":8080", Labels: map[string]string{"namespace": p.Namespace, "pod": p.Name}})
		}
	}
	prom.SetTargets(t, "provider-peerrelay", providers...)
	var relays []harness.Target
	for i := range replicas {
		p := &corev1.Pod{}
		pod := fmt.Sprintf("%s-%d-0", name, i)
		if err := s.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
			t.Fatal(err)
		}
		relays = append(relays, harness.Target{Address: p.Status.PodIP + ":9002", Labels: map[string]string{"namespace": ns, "pod": pod}})
	}
	prom.SetTargets(t, "relays", relays...)
	return prom
}

// dashboardAnswers: every query of docs/grafana-dashboard.json (its
// $namespace the PeerRelay's) returns data from what Prometheus scraped,
// and every alert rule evaluates without error.
func (s *system) dashboardAnswers(ctx context.Context, t *testing.T, prom *harness.Prometheus, ns string) {
	t.Helper()
	for _, p := range dashboardPanels(t) {
		for _, target := range p.Targets {
			expr := strings.ReplaceAll(target.Expr, "$namespace", ns)
			harness.Eventually(t, time.Minute, fmt.Sprintf("panel %q: %s returns data", p.Title, expr), func(ctx context.Context) error {
				got, err := prom.Query(ctx, expr)
				if err == nil && len(got) == 0 {
					err = fmt.Errorf("no data")
				}
				return err
			})
		}
	}
	harness.Eventually(t, 30*time.Second, "every alert rule evaluated, without error", func(ctx context.Context) error {
		rules, err := prom.Rules(ctx)
		if err != nil {
			return err
		}
		if len(rules) == 0 {
			return fmt.Errorf("no rules loaded")
		}
		for _, r := range rules {
			if r.Health != "ok" {
				return fmt.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
			}
		}
		return nil
	})
}

// waitAlerts waits until the alerts firing are exactly want, each
// "alertname relayconfig" (relayconfig empty for an alert without one).
func waitAlerts(ctx context.Context, t *testing.T, prom *harness.Prometheus, want ...string) {
	t.Helper()
	slices.Sort(want)
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("alerts firing: %v", want), func(ctx context.Context) error {
		alerts, err := prom.Alerts(ctx)
		if err != nil {
			return err
		}
		var firing []string
		for _, a := range alerts {
			if a.State == "firing" {
				firing = append(firing, strings.TrimSpace(a.Labels["alertname"]+" "+a.Labels["relayconfig"]))
			}
		}
		slices.Sort(firing)
		if !slices.Equal(firing, want) {
			return fmt.Errorf("firing %v", firing)
		}
		return nil
	})
}
