package node

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
)

// pushTailscale pushes the tailscale image the function composes
// (v1alpha1.DefaultImage, a Docker Hub name the node's containerd takes
// from the registry): containerboot as its entrypoint, tailscaled and
// tailscale beside it in /usr/local/bin, as in Tailscale's image, built
// from the same tailscale.com version by make tools, and a CA bundle of
// the host's roots and trusted.
func pushTailscale(t testing.TB, reg Registry, bin string, trusted []byte) {
	t.Helper()
	roots, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	files := []harness.ImageFile{{Path: "etc/ssl/certs/ca-certificates.crt", Content: append(roots, trusted...), Mode: 0o644}}
	for _, b := range []string{"containerboot", "tailscaled", "tailscale"} {
		content, err := os.ReadFile(filepath.Join(bin, b))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, harness.ImageFile{Path: "usr/local/bin/" + b, Content: content, Mode: 0o755})
	}
	img := harness.FilesImage(t, runtime.GOARCH, files, "/usr/local/bin/containerboot")
	// Tailscale's image runs as root; the pod's securityContext says as whom.
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.User = ""
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	push(t, reg, reg.Host+"/"+v1alpha1.DefaultImage, img)
}

func push(t testing.TB, reg Registry, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithTransport(registryTransport(reg))); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
}
