// Command pinconfig stages the configuration package for a release: a copy
// of its package root whose crossplane.yaml pins every dependency (the
// function and the provider) to the release's minor line, ">=vX.Y.Z,
// <vX.(Y+1).0". Crossplane then installs the matching Function and Provider
// with the Configuration, and reports any other version of them as an
// unsatisfied dependency (see the README, "Releases and upgrades").
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"
)

func main() {
	src := flag.String("src", "package/configuration", "the configuration's package root")
	dst := flag.String("dst", "", "where to stage the pinned copy")
	version := flag.String("version", "", "the release (vX.Y.Z)")
	flag.Parse()
	if err := run(*src, *dst, *version); err != nil {
		fmt.Fprintln(os.Stderr, "pinconfig:", err)
		os.Exit(1)
	}
}

func run(src, dst, version string) error {
	rng, err := minorRange(version)
	if err != nil {
		return err
	}
	if dst == "" {
		return fmt.Errorf("-dst is required")
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return err
	}
	meta := filepath.Join(dst, "crossplane.yaml")
	b, err := os.ReadFile(meta)
	if err != nil {
		return err
	}
	pinned, err := pin(b, rng)
	if err != nil {
		return fmt.Errorf("%s: %w", meta, err)
	}
	return os.WriteFile(meta, pinned, 0o644)
}

// minorRange is the dependency range of release version: its minor line.
func minorRange(version string) (string, error) {
	if semver.Canonical(version) != version { // "" when not semver at all
		return "", fmt.Errorf("-version %q: want a release such as v0.2.0", version)
	}
	var major, minor int
	if _, err := fmt.Sscanf(semver.MajorMinor(version), "v%d.%d", &major, &minor); err != nil {
		return "", fmt.Errorf("-version %q: %w", version, err)
	}
	return fmt.Sprintf(">=%s, <v%d.%d.0", version, major, minor+1), nil
}

// pin sets spec.dependsOn[*].version of a Configuration's metadata.
func pin(meta []byte, rng string) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(meta, &m); err != nil {
		return nil, err
	}
	spec, _ := m["spec"].(map[string]any)
	deps, _ := spec["dependsOn"].([]any)
	if len(deps) == 0 {
		return nil, fmt.Errorf("spec.dependsOn: no dependency to pin")
	}
	for i, d := range deps {
		dep, ok := d.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.dependsOn[%d]: not an object", i)
		}
		dep["version"] = rng
	}
	return yaml.Marshal(m)
}
