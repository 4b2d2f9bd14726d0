package kubelet

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// imageFor is a one-file image for arch whose /arch file names it.
func imageFor(t *testing.T, arch string) string {
	t.Helper()
	img := harness.OneFileImage(t, "arch", []byte(arch), 0o644, arch, "/bin/"+arch)
	p := filepath.Join(t.TempDir(), arch+".tar")
	if err := tarball.WriteToFile(p, nil, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNodePullsItsArchitecture: an index of two architectures pushed to the
// registry (answering under a public name) is pulled for this machine's,
// and unpacked as the pod's root; an image from elsewhere is refused.
func TestNodePullsItsArchitecture(t *testing.T) {
	harness.Need(t, os.Geteuid() == 0, "the registry listens on port 443: run as root")
	reg := crossplane.StartRegistry(t, "registry.test")
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	reg.Push(t, "team/app", "v1", imageFor(t, other), imageFor(t, runtime.GOARCH))
	n := &Node{o: Options{Registry: reg}}
	root := t.TempDir()
	cfg, err := n.pullImage(context.Background(), "registry.test/team/app:v1", root)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "arch")); string(got) != runtime.GOARCH {
		t.Errorf("unpacked the %q image, want %s", got, runtime.GOARCH)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/bin/" + runtime.GOARCH}) {
		t.Errorf("entrypoint %v", cfg.Entrypoint)
	}
	if _, err := n.pullImage(context.Background(), "docker.io/library/busybox:1", t.TempDir()); err == nil {
		t.Error("pulled an image from a registry the node does not know")
	}
}

// TestContainerArgv: a container's command and args combine with the
// image's entrypoint and cmd as a kubelet combines them.
func TestContainerArgv(t *testing.T) {
	image := &v1.Config{Entrypoint: []string{"/entry"}, Cmd: []string{"--cmd"}}
	cases := map[string]struct {
		reason string
		c      corev1.Container
		image  *v1.Config
		want   []string
	}{
		"ImageOnly": {"neither: the image's entrypoint and cmd", corev1.Container{}, image, []string{"/entry", "--cmd"}},
		"ArgsOnly":  {"args replace the image's cmd", corev1.Container{Args: []string{"--a"}}, image, []string{"/entry", "--a"}},
		"Command":   {"a command drops the image's entrypoint and cmd", corev1.Container{Command: []string{"/c"}}, image, []string{"/c"}},
		"Both":      {"command and args", corev1.Container{Command: []string{"/c"}, Args: []string{"--a"}}, image, []string{"/c", "--a"}},
		"Tailscale": {"the played tailscale image runs containerboot", corev1.Container{Args: []string{"--a"}}, nil, []string{"/usr/local/bin/containerboot", "--a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &podRun{image: tc.image}
			if got := r.argv(&tc.c); !slices.Equal(got, tc.want) {
				t.Errorf("%s: argv %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestUntarKeepsModes: an image's /tmp (1777) stays world-writable and
// sticky, and a file keeps its permissions, as the containers need.
func TestUntarKeepsModes(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "tmp/", Mode: 0o1777, Typeflag: tar.TypeDir})
	_ = tw.WriteHeader(&tar.Header{Name: "bin", Mode: 0o755, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	root := t.TempDir()
	if err := untar(&buf, root); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"tmp": os.ModeDir | os.ModeSticky | 0o777, "bin": 0o755} {
		fi, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
}
