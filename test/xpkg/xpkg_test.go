// Package xpkg opens the packages `make xpkg` built, parses and lints their
// package.yaml with crossplane-runtime's parser and linters (what Crossplane
// runs on install), and checks their runtime images.
package xpkg

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
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

// version is the release `make xpkg` builds (its VERSION).
const version = "v0.2.0"

// arches are the architectures every package with a runtime is built for.
var arches = []string{"amd64", "arm64"}

// open opens a built package: name-vX.xpkg, or with arch name-vX-arch.xpkg.
func open(t *testing.T, name, arch string) v1.Image {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pattern := name + "-" + version + ".xpkg"
	if arch != "" {
		pattern = name + "-" + version + "-" + arch + ".xpkg"
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
				"ManagedResourceActivationPolicy/peerrelay",
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
	meta, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pkg.GetMeta()[0])
	if err != nil {
		t.Fatal(err)
	}
	checkMarketplaceMeta(t, meta)
	if !hasExamples(t, img) {
		t.Error("the package carries no examples (crossplane xpkg build --examples-root)")
	}
	if name == "configuration-peerrelay" {
		// Pinned to the release's minor line (hack/pinconfig), whatever
		// the source's crossplane.yaml says.
		deps, _, _ := unstructured.NestedSlice(meta, "spec", "dependsOn")
		for _, d := range deps {
			if v, _ := d.(map[string]any)["version"].(string); v != ">=v0.2.0, <v0.3.0" {
				t.Errorf("dependsOn %v: version %q, want %q", d, v, ">=v0.2.0, <v0.3.0")
			}
		}
	}
	if name == "provider-peerrelay" {
		// safe-start: Crossplane keeps the RelayConfig CRD until a policy
		// activates it, and the provider waits for it (provider.Setup).
		if caps, _, _ := unstructured.NestedStringSlice(meta, "spec", "capabilities"); !slices.Contains(caps, "safe-start") {
			t.Errorf("spec.capabilities %v: want safe-start", caps)
		}
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
	if v := cf.Config.Labels["org.opencontainers.image.version"]; v != version {
		t.Errorf("label org.opencontainers.image.version %q, want %q", v, version)
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
		if name == entrypoint || name == "/etc/ssl/certs/ca-certificates.crt" || name == "/sbom.cdx.json" {
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
	checkSBOM(t, files["/sbom.cdx.json"], bin)
}

// checkMarketplaceMeta: the annotations a package marketplace reads are
// all there, and the icon is a file of this repository.
func checkMarketplaceMeta(t *testing.T, meta map[string]any) {
	t.Helper()
	annotations, _, _ := unstructured.NestedStringMap(meta, "metadata", "annotations")
	for _, a := range []string{"meta.crossplane.io/maintainer", "meta.crossplane.io/source", "meta.crossplane.io/license",
		"meta.crossplane.io/description", "meta.crossplane.io/readme", "meta.crossplane.io/iconURI", "friendly-name.meta.crossplane.io"} {
		if strings.TrimSpace(annotations[a]) == "" {
			t.Errorf("annotation %s is missing", a)
		}
	}
	icon, ok := strings.CutPrefix(annotations["meta.crossplane.io/iconURI"], "https://raw.githubusercontent.com/peerrelay/peerrelay/main/")
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, icon)); !ok || err != nil {
		t.Errorf("iconURI %q: not a file of this repository on main", annotations["meta.crossplane.io/iconURI"])
	}
}

// hasExamples tells whether the package image has the examples
// crossplane xpkg build --examples-root adds (.up/examples.yaml), with a
// PeerRelay among them.
func hasExamples(t *testing.T, img v1.Image) bool {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") == ".up/examples.yaml" {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Contains(b, []byte("kind: PeerRelay"))
		}
	}
}

// checkSBOM: the image's SBOM is CycloneDX, names the release, and lists
// every module the binary says it was built from, at its version.
func checkSBOM(t *testing.T, sbom, bin []byte) {
	t.Helper()
	if sbom == nil {
		t.Fatal("the image has no SBOM at /sbom.cdx.json")
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version string } `json:"components"`
	}
	if err := json.Unmarshal(sbom, &bom); err != nil {
		t.Fatalf("/sbom.cdx.json: %v", err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/peerrelay/peerrelay" || bom.Metadata.Component.Version != version {
		t.Errorf("SBOM %s of %s %s, want CycloneDX of github.com/peerrelay/peerrelay %s", bom.BOMFormat, bom.Metadata.Component.Name, bom.Metadata.Component.Version, version)
	}
	listed := map[string]bool{}
	for _, c := range bom.Components {
		listed[c.Name+"@"+c.Version] = true
	}
	f, err := os.CreateTemp(t.TempDir(), "bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bin); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	info, err := buildinfo.ReadFile(f.Name())
	if err != nil {
		t.Fatalf("the binary's build info: %v", err)
	}
	if len(info.Deps) < 20 {
		t.Fatalf("the binary names %d modules", len(info.Deps))
	}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		if !listed[d.Path+"@"+d.Version] {
			t.Errorf("the SBOM does not list %s@%s, which the binary is built from", d.Path, d.Version)
		}
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
