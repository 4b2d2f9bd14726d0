// Command imagebuild writes a runtime image for a static Go binary without
// Docker: one layer holding the binary on an empty base, run as user 65532.
// The image tarball is reproducible (fixed timestamps), for
// `crossplane xpkg build --embed-runtime-image-tarball`.
package main

import (
	"archive/tar"
	"bytes"
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
)

func main() {
	bin := flag.String("binary", "", "static binary to put in the image")
	tag := flag.String("tag", "", "image reference recorded in the tarball")
	port := flag.String("port", "", "TCP port the program listens on, if any (e.g. 9443)")
	out := flag.String("o", "", "output image tarball")
	flag.Parse()
	if err := run(*bin, *tag, *port, *out); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(bin, tag, port, out string) error {
	if bin == "" || tag == "" || out == "" {
		return fmt.Errorf("-binary, -tag and -o are required")
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	entry := "/" + path.Base(bin)
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: entry[1:], Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Uid: 0, Gid: 0}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
		if err := tw.Close(); err != nil {
			return nil, err
		}
		return io.NopCloser(&buf), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg := v1.Config{Entrypoint: []string{entry}, User: "65532:65532", WorkingDir: "/"}
	if port != "" {
		cfg.ExposedPorts = map[string]struct{}{port + "/tcp": {}}
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
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}
