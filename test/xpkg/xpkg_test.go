// Package xpkg opens the packages `make xpkg` built, parses and lints their
// package.yaml with crossplane-runtime's parser and linters (what Crossplane
// runs on install), and checks their runtime images.
package xpkg

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerrelay/peerrelay/test/harness"
)

func open(t *testing.T, name string) v1.Image {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(root, ".cache/xpkg", name+"-v*.xpkg"))
	if len(matches) == 0 {
		harness.Missing(t, "no %s package in .cache/xpkg: run `make xpkg`", name)
	}
	img, err := tarball.ImageFromPath(matches[0], nil)
	if err != nil {
		t.Fatalf("%s is not an OCI image tarball: %v", matches[0], err)
	}
	return img
}

func TestPackages(t *testing.T) {
	cases := map[string]struct {
		linter     parser.Linter
		objects    []string // kind/name of every object besides the meta
		entrypoint string
		port       string
	}{
		"function-peerrelay": {
			linter:     xpkg.NewFunctionLinter(),
			objects:    []string{"CustomResourceDefinition/inputs.fn.peerrelay.io"},
			entrypoint: "/function-peerrelay",
			port:       "9443/tcp",
		},
		"provider-peerrelay": {
			linter: xpkg.NewProviderLinter(),
			objects: []string{
				"CustomResourceDefinition/clusterproviderconfigs.relay.peerrelay.io",
				"CustomResourceDefinition/providerconfigs.relay.peerrelay.io",
				"CustomResourceDefinition/providerconfigusages.relay.peerrelay.io",
				"CustomResourceDefinition/relayconfigs.relay.peerrelay.io",
			},
			entrypoint: "/provider-peerrelay",
		},
		"configuration-peerrelay": {
			linter: xpkg.NewConfigurationLinter(),
			objects: []string{
				"CompositeResourceDefinition/peerrelays.peerrelay.io",
				"CompositeResourceDefinition/xpeerrelays.legacy.peerrelay.io",
				"Composition/peerrelays.peerrelay.io",
				"Composition/xpeerrelays.legacy.peerrelay.io",
			},
		},
	}
	metaScheme, err := xpkg.BuildMetaScheme()
	if err != nil {
		t.Fatal(err)
	}
	objScheme, err := xpkg.BuildObjectScheme()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img := open(t, name)
			rc, err := xpkg.ExtractPackageYAML(img)
			if err != nil {
				t.Fatalf("package.yaml: %v", err)
			}
			defer func() { _ = rc.Close() }()
			pkg, err := parser.New(metaScheme, objScheme).Parse(context.Background(), rc)
			if err != nil {
				t.Fatalf("Crossplane's parser rejects the package: %v", err)
			}
			if err := tc.linter.Lint(pkg); err != nil {
				t.Fatalf("Crossplane's linter rejects the package: %v", err)
			}
			var got []string
			for _, o := range pkg.GetObjects() {
				got = append(got, kindName(t, o))
			}
			sort.Strings(got)
			if !slices.Equal(got, tc.objects) {
				t.Errorf("objects: want %v, got %v", tc.objects, got)
			}
			if tc.entrypoint == "" {
				return
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{tc.entrypoint}) {
				t.Errorf("entrypoint: want %s, got %v", tc.entrypoint, cf.Config.Entrypoint)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user: want 65532:65532 (non-root), got %q", cf.Config.User)
			}
			if tc.port != "" {
				if _, ok := cf.Config.ExposedPorts[tc.port]; !ok {
					t.Errorf("exposed ports: want %s, got %v", tc.port, cf.Config.ExposedPorts)
				}
			}
		})
	}
}

func kindName(t *testing.T, o runtime.Object) string {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := unstructured.Unstructured{Object: m}
	kind := u.GetKind()
	if kind == "" {
		kind = o.GetObjectKind().GroupVersionKind().Kind
	}
	return kind + "/" + u.GetName()
}
