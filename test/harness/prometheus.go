package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Prometheus is a real Prometheus server (built from its module, make
// tools) on loopback, scraping the targets the test gives it every second
// and evaluating the rule file it was started with every second.
type Prometheus struct {
	URL string
	dir string
}

// ScrapeJob is one file-discovered scrape job, whose targets SetTargets
// writes.
type ScrapeJob struct {
	Name string
	// HonorLabels keeps the labels a target's series carry over the
	// target's own (honor_labels: a provider's per-namespace series).
	HonorLabels bool
}

// StartPrometheus starts Prometheus with rules (a rule file's content; nil
// for none) and jobs. It stops when the test ends.
func StartPrometheus(t testing.TB, rules []byte, jobs ...ScrapeJob) *Prometheus {
	t.Helper()
	dir := t.TempDir()
	cfg := "global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 900ms}\n"
	if rules != nil {
		if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += "rule_files: [rules.yaml]\n"
	}
	cfg += "scrape_configs:\n"
	for _, j := range jobs {
		cfg += fmt.Sprintf("- job_name: %q\n  honor_labels: %t\n  file_sd_configs: [{files: [%q], refresh_interval: 1s}]\n", j.Name, j.HonorLabels, j.Name+".json")
		if err := os.WriteFile(filepath.Join(dir, j.Name+".json"), []byte("[]"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	StartProcess(t, "prometheus", Tool(t, "prometheus"), []string{
		"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
	}, nil)
	p := &Prometheus{URL: "http://" + addr, dir: dir}
	Eventually(t, time.Minute, "Prometheus ready", func(ctx context.Context) error {
		return p.get(ctx, "/-/ready", nil)
	})
	return p
}

// Target is one scrape target: host:port and the labels its series get.
type Target struct {
	Address string
	Labels  map[string]string
}

// SetTargets replaces job's targets (Prometheus rereads them within 1 s).
func (p *Prometheus) SetTargets(t testing.TB, job string, targets ...Target) {
	t.Helper()
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	groups := []group{}
	for _, tg := range targets {
		groups = append(groups, group{Targets: []string{tg.Address}, Labels: tg.Labels})
	}
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	// Written whole, then renamed: Prometheus never reads half a file.
	tmp := filepath.Join(p.dir, job+".json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, job+".json")); err != nil {
		t.Fatal(err)
	}
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query evaluates expr now.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	var r struct {
		ResultType string   `json:"resultType"`
		Result     []Sample `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &r); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	return r.Result, nil
}

// Alert is an alert Prometheus holds, pending or firing.
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Alerts are the alerts pending or firing now.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var r struct {
		Alerts []Alert `json:"alerts"`
	}
	return r.Alerts, p.get(ctx, "/api/v1/alerts", &r)
}

// Rule is a loaded rule's last evaluation.
type Rule struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// Rules are the loaded rules, as last evaluated.
func (p *Prometheus) Rules(ctx context.Context) ([]Rule, error) {
	var r struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", &r); err != nil {
		return nil, err
	}
	var out []Rule
	for _, g := range r.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// get reads path; into (when not nil) receives the API's data.
func (p *Prometheus) get(ctx context.Context, path string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = rsp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(rsp.Body, 8<<20))
	if err != nil {
		return err
	}
	if rsp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, rsp.Status, b)
	}
	if into == nil {
		return nil
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, into)
}

// AlertRules reads docs/alerts/prometheusrule.yaml: the PrometheusRule as
// shipped (JSON) and its spec as the Prometheus rule file it is (YAML).
func AlertRules(t testing.TB) (prometheusRule, ruleFile []byte) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs/alerts/prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if prometheusRule, err = yaml.YAMLToJSON(b); err != nil {
		t.Fatalf("docs/alerts/prometheusrule.yaml: %v", err)
	}
	var rule struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(prometheusRule, &rule); err != nil {
		t.Fatal(err)
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec) == 0 {
		t.Fatalf("docs/alerts/prometheusrule.yaml: a %q with spec %s, want a PrometheusRule", rule.Kind, rule.Spec)
	}
	if ruleFile, err = yaml.JSONToYAML(rule.Spec); err != nil {
		t.Fatal(err)
	}
	return prometheusRule, ruleFile
}
