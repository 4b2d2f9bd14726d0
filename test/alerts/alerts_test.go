// Package alerts checks the alert rules peerrelay ships
// (docs/alerts/prometheusrule.yaml) with Prometheus's own promtool: the
// rules parse, and each behaves as its unit tests (docs/alerts/
// rules_test.yaml) say, firing and resolving on series shaped as the
// provider and Crossplane export them.
package alerts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/peerrelay/peerrelay/test/harness"
)

func TestAlertRules(t *testing.T) {
	promtool := harness.Tool(t, "promtool")
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, rules := harness.AlertRules(t)
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert string } `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &rule); err != nil {
		t.Fatal(err)
	}
	// The PrometheusRule's spec is a Prometheus rule file.
	dir := t.TempDir()
	tests, err := os.ReadFile(filepath.Join(root, "docs/alerts/rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rules.yaml": rules, "rules_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}

	// Every alert has a unit test in which it fires.
	var unit struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &unit); err != nil {
		t.Fatal(err)
	}
	var fired []string
	for _, tc := range unit.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired = append(fired, a.Alertname)
			}
		}
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !slices.Contains(fired, r.Alert) {
				t.Errorf("alert %s: no unit test in docs/alerts/rules_test.yaml sees it fire", r.Alert)
			}
		}
	}
}
