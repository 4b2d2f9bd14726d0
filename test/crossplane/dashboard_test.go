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

	"github.com/peerrelay/peerrelay/test/harness"
)

// dashboardMetrics returns the metric names docs/grafana-dashboard.json
// queries that start with one of prefixes: the system tests check that
// the pods they scrape export each of them, so the dashboard never shows
// a metric nothing serves.
func dashboardMetrics(t *testing.T, prefixes ...string) []string {
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
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	name := regexp.MustCompile(`\b(` + strings.Join(prefixes, "|") + `)[a-z_]*`)
	var out []string
	for _, p := range d.Panels {
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
