// Package harness holds what every test tier shares: the repository and
// its built tools, the one gate for tests that need a real part (Need),
// processes, kube-apiserver and etcd built from the Go module proxy
// (driven by envtest), kubeconfigs, test certificates, Follow (a watch
// that resumes), and Eventually. The parts themselves live in packages of
// their own:
//
//   - cloud: moto_server (AWS) and its fixtures, a DNS server, a fault proxy;
//   - crossplane: Crossplane core (its webhooks on, as Helm installs it)
//     and its RBAC manager, the package registry, the cluster DNS, the
//     External package runtime;
//   - kubelet: the test node that runs pods (images, volumes, network and
//     mount namespaces, probes), or a hollow one that runs none;
//   - tailnet: Tailscale's control plane and real tailscaled processes;
//   - providertest: the provider running against an API server.
package harness

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RepoRoot finds the repository root: the folder holding this module's
// go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(b) > 0 && string(firstLine(b)) == "module github.com/peerrelay/peerrelay" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no github.com/peerrelay/peerrelay go.mod above the working directory")
		}
		dir = parent
	}
}

func firstLine(b []byte) []byte {
	for i, c := range b {
		if c == '\n' {
			return b[:i]
		}
	}
	return b
}

// ToolsDir is where `make tools` puts the test binaries: $PEERRELAY_TOOLS_BIN
// or <repo>/.cache/bin.
func ToolsDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("PEERRELAY_TOOLS_BIN"); d != "" {
		return d
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".cache", "bin")
}

// Tool returns the path of a built test tool (Need: `make tools`).
func Tool(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(ToolsDir(t), name)
	_, err := os.Stat(p)
	Need(t, err == nil, "%s not found at %s: run `make tools`", name, p)
	return p
}

// Need is the one gate of tests that need a real part: a binary `make
// tools` builds, moto_server, root, the built packages. Every such part is
// reached through this package, which calls Need first. Under -short (the
// unit tier, `make unit`) the test is skipped; when the part is absent
// (present false) it is skipped with the message, which says how to get
// it, except under CI (CI set), where every part must be present and the
// test fails.
func Need(t testing.TB, present bool, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	switch {
	case testing.Short():
		t.Skip("-short: the unit tier runs no real part: " + msg)
	case present:
	case os.Getenv("CI") != "":
		t.Fatalf("CI is set, so this real part must be present: %s", msg)
	default:
		t.Skip(msg)
	}
}

// ModuleDir is where the Go module cache holds module mod, as the module in
// dir (relative to the repository root: "." or a tools wrapper)
// resolves it.
func ModuleDir(t testing.TB, dir, mod string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = filepath.Join(root, dir)
	out, err := cmd.Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("cannot find module %s through %s: %v", mod, dir, err)
	}
	return string(bytes.TrimSpace(out))
}
