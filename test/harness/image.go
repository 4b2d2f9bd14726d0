package harness

import (
	"archive/tar"
	"bytes"
	"io"
	"path"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageFile is a file of an image made by FilesImage: its path from the
// root, its content and mode.
type ImageFile struct {
	Path    string
	Content []byte
	Mode    int64
}

// OneFileImage is an image for linux/arch of one file at the root of its
// file system (mode 0755 for a program), run as 65532 with entrypoint.
func OneFileImage(t testing.TB, file string, content []byte, mode int64, arch string, entrypoint ...string) v1.Image {
	t.Helper()
	return FilesImage(t, arch, []ImageFile{{Path: file, Content: content, Mode: mode}}, entrypoint...)
}

// FilesImage is an image for linux/arch of files (their folders made), in
// one layer, run as 65532 with entrypoint.
func FilesImage(t testing.TB, arch string, files []ImageFile, entrypoint ...string) v1.Image {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.Path); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: f.Mode, Size: int64(len(f.Content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(f.Content)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config = v1.Config{Entrypoint: entrypoint, User: "65532:65532"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}
