// Package harness starts the real parts the integration tests talk to: a
// kube-apiserver and etcd built from the Go module proxy (driven by envtest)
// and moto_server for AWS. Each helper skips with a clear message when its
// tool is absent, except under CI (CI set), where a missing tool fails.
package harness

import (
	"fmt"
	"os"
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

// Tool returns the path of a built test tool, or skips (fails under CI)
// when it is missing.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(ToolsDir(t), name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "%s not found at %s: run `make tools`", name, p)
	}
	return p
}

// Missing skips the test, or fails it under CI where every part must be
// present.
func Missing(t testing.TB, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set, so this real part must be present: %s", msg)
	}
	t.Skip(msg)
}
