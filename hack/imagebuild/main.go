// Command imagebuild writes a runtime image for a static Go binary without
// Docker, shaped like distroless/static: the binary, the public CA roots at
// /etc/ssl/certs/ca-certificates.crt (so HTTPS to the Tailscale API and AWS
// works from the pod; SSL_CERT_FILE still overrides it), a world-writable
// /tmp, run as user 65532. With -sbom, the binary's CycloneDX SBOM is at
// /sbom.cdx.json; with -version, the image's OCI labels say its version
// and source. The image is for one platform (-arch) and the tarball is
// reproducible (fixed timestamps), for
// `crossplane xpkg build --embed-runtime-image-tarball`.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CABundle is where the image keeps the CA roots: the first path Go's
// crypto/x509 (and most other TLS stacks) reads on Linux.
const CABundle = "etc/ssl/certs/ca-certificates.crt"

// SBOM is where the image keeps its binary's SBOM (CycloneDX JSON).
const SBOM = "sbom.cdx.json"

// Source is the repository the images are built from, in their labels.
const Source = "https://github.com/peerrelay/peerrelay"

// options say what goes into the image.
type options struct {
	bin, tag, port, arch, out string
	// version labels the image (org.opencontainers.image.version).
	version string
	// sbom is the path of the binary's SBOM, embedded at /sbom.cdx.json.
	sbom string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "binary", "", "static binary to put in the image")
	flag.StringVar(&o.tag, "tag", "", "image reference recorded in the tarball")
	flag.StringVar(&o.port, "port", "", "TCP port the program listens on, if any (e.g. 9443)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "the binary's architecture (GOARCH)")
	flag.StringVar(&o.out, "o", "", "output image tarball")
	flag.StringVar(&o.version, "version", "", "the release, for the image's labels (e.g. v0.2.0)")
	flag.StringVar(&o.sbom, "sbom", "", "the binary's CycloneDX SBOM (JSON), embedded at /"+SBOM)
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.bin == "" || o.tag == "" || o.out == "" {
		return fmt.Errorf("-binary, -tag and -o are required")
	}
	data, err := os.ReadFile(o.bin)
	if err != nil {
		return err
	}
	var sbom []byte
	if o.sbom != "" {
		if sbom, err = os.ReadFile(o.sbom); err != nil {
			return err
		}
	}
	entry := "/" + path.Base(o.bin)
	files, err := rootFS(entry[1:], data, sbom)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg := v1.Config{Entrypoint: []string{entry}, User: "65532:65532", WorkingDir: "/"}
	if o.port != "" {
		cfg.ExposedPorts = map[string]struct{}{o.port + "/tcp": {}}
	}
	if o.version != "" {
		cfg.Labels = map[string]string{"org.opencontainers.image.version": o.version, "org.opencontainers.image.source": Source}
	}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(o.tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(o.out, ref, img)
}

// rootFS is the image's one layer: directories, the CA roots, the binary
// and, when there is one, its SBOM.
func rootFS(binName string, bin, sbom []byte) ([]byte, error) {
	var roots bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			// A distrust-after date cannot be said in a PEM file; leaving
			// the root out is what distributions' bundles do.
			continue
		}
		if err := pem.Encode(&roots, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"etc/ssl/", 0o755}, {"etc/ssl/certs/", 0o755}, {"tmp/", 0o1777}} {
		if err := tw.WriteHeader(&tar.Header{Name: d.name, Mode: d.mode, Typeflag: tar.TypeDir, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	type file struct {
		name string
		mode int64
		data []byte
	}
	files := []file{{CABundle, 0o644, roots.Bytes()}, {binName, 0o755, bin}}
	if sbom != nil {
		files = append(files, file{SBOM, 0o644, sbom})
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
