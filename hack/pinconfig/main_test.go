package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestMinorRange(t *testing.T) {
	cases := map[string]struct {
		reason  string
		version string
		want    string
		wantErr bool
	}{
		"Release":    {reason: "A release pins its minor line.", version: "v0.2.0", want: ">=v0.2.0, <v0.3.0"},
		"Patch":      {reason: "A patch release admits later patches of its line.", version: "v1.4.3", want: ">=v1.4.3, <v1.5.0"},
		"Prerelease": {reason: "A release candidate admits the release.", version: "v0.3.0-rc.1", want: ">=v0.3.0-rc.1, <v0.4.0"},
		"NoV":        {reason: "Crossplane's tags start with v.", version: "0.2.0", wantErr: true},
		"Short":      {reason: "A version names all three numbers.", version: "v0.2", wantErr: true},
		"Build":      {reason: "Build metadata is not a release.", version: "v0.2.0+abc", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := minorRange(tc.version)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nminorRange(%q): error %v, want error %v", tc.reason, tc.version, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nminorRange(%q): -want +got:\n%s", tc.reason, tc.version, diff)
			}
		})
	}
}

func TestPin(t *testing.T) {
	meta := []byte(`apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: c
spec:
  crossplane:
    version: ">=v2.4.0"
  dependsOn:
  - {kind: Function, package: f, version: ">=v0.1.0"}
  - {kind: Provider, package: p, version: ">=v0.1.0"}
`)
	out, err := pin(meta, ">=v0.2.0, <v0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "meta.pkg.crossplane.io/v1", "kind": "Configuration", "metadata": map[string]any{"name": "c"},
		"spec": map[string]any{
			"crossplane": map[string]any{"version": ">=v2.4.0"}, // Crossplane's own range is kept
			"dependsOn": []any{
				map[string]any{"kind": "Function", "package": "f", "version": ">=v0.2.0, <v0.3.0"},
				map[string]any{"kind": "Provider", "package": "p", "version": ">=v0.2.0, <v0.3.0"},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pin: -want +got:\n%s", diff)
	}
	if _, err := pin([]byte("spec: {}"), ">=v0.2.0, <v0.3.0"); err == nil {
		t.Error("pin of a Configuration with no dependency: no error")
	}
}
