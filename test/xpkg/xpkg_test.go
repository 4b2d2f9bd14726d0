// Package xpkg opens the packages `make xpkg` built, parses and lints their
// package.yaml with crossplane-runtime's parser and linters (what Crossplane
// runs on install), and checks their runtime images.
package xpkg

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerrelay/peerrelay/test/harness"
)

// arches are the architectures every package with a runtime is built for.
var arches = []string{"amd64", "arm64"}

// open opens a built package: name-vX.xpkg, or with arch name-vX-arch.xpkg.
func open(t *testing.T, name, arch string) v1.Image {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pattern := name + "-v*.xpkg"
	if arch != "" {
		pattern = name + "-v*-" + arch + ".xpkg"
	}
	matches, _ := filepath.Glob(filepath.Join(root, ".cache/xpkg", pattern))
	harness.Need(t, len(matches) > 0, "no %s package in .cache/xpkg: run `make xpkg`", pattern)
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
				"ManagedResourceActivationPolicy/peerrelay-aws",
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
		for _, arch := range arches {
			if tc.entrypoint == "" && arch != arches[0] {
				continue
			}
			if tc.entrypoint == "" {
				arch = ""
			}
			t.Run(name+"/"+arch, func(t *testing.T) {
				checkPackage(t, name, arch, tc.linter, tc.objects, tc.entrypoint, tc.port, metaScheme, objScheme)
			})
		}
	}
}

// checkPackage checks one built package: Crossplane's parser and linter
// accept it, it holds the objects it should, and its runtime image (for
// arch) runs the right binary, as a non-root user, with CA roots.
func checkPackage(t *testing.T, name, arch string, linter parser.Linter, objects []string, entrypoint, port string, metaScheme, objScheme parser.ObjectCreaterTyper) {
	img := open(t, name, arch)
	rc, err := xpkg.ExtractPackageYAML(img)
	if err != nil {
		t.Fatalf("package.yaml: %v", err)
	}
	defer func() { _ = rc.Close() }()
	pkg, err := parser.New(metaScheme, objScheme).Parse(context.Background(), rc)
	if err != nil {
		t.Fatalf("Crossplane's parser rejects the package: %v", err)
	}
	if err := linter.Lint(pkg); err != nil {
		t.Fatalf("Crossplane's linter rejects the package: %v", err)
	}
	var got []string
	for _, o := range pkg.GetObjects() {
		got = append(got, kindName(t, o))
	}
	sort.Strings(got)
	if !slices.Equal(got, objects) {
		t.Errorf("objects: want %v, got %v", objects, got)
	}
	if entrypoint == "" {
		return
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{entrypoint}) {
		t.Errorf("entrypoint: want %s, got %v", entrypoint, cf.Config.Entrypoint)
	}
	if cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("platform: want linux/%s, got %s/%s", arch, cf.OS, cf.Architecture)
	}
	checkFiles(t, img, entrypoint, arch)
	if cf.Config.User != "65532:65532" {
		t.Errorf("user: want 65532:65532 (non-root), got %q", cf.Config.User)
	}
	if port != "" {
		if _, ok := cf.Config.ExposedPorts[port]; !ok {
			t.Errorf("exposed ports: want %s, got %v", port, cf.Config.ExposedPorts)
		}
	}
}

// elfMachines is the ELF machine each GOARCH's binaries are built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkFiles reads the image's file system: the entrypoint is a static
// executable for arch, and the CA roots Go reads on Linux are there, so
// HTTPS to the Tailscale API and AWS verifies from the pod.
func checkFiles(t *testing.T, img v1.Image, entrypoint, arch string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimPrefix(h.Name, "/")
		if name == entrypoint || name == "/etc/ssl/certs/ca-certificates.crt" {
			if files[name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	bin, ok := files[entrypoint]
	if !ok {
		t.Fatalf("the image has no %s", entrypoint)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s is not an ELF executable: %v", entrypoint, err)
	}
	if f.Machine != elfMachines[arch] {
		t.Errorf("%s is built for %v, want %v (%s)", entrypoint, f.Machine, elfMachines[arch], arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked: the image has no libc", entrypoint)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files["/etc/ssl/certs/ca-certificates.crt"]) {
		t.Fatal("the image has no CA roots at /etc/ssl/certs/ca-certificates.crt")
	}
	if n := len(pool.Subjects()); n < 100 { //nolint:staticcheck // counting, not verifying
		t.Errorf("the image's CA bundle holds %d roots; a public bundle has over 100", n)
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
