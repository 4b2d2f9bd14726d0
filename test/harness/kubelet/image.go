package kubelet

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// tailscaleImage reports whether image is the tailscale image, which the
// node plays with containerboot, tailscaled and tailscale built from
// tailscale.com (the registry it lives in is not reachable here).
func tailscaleImage(image string) bool {
	ref, err := name.ParseReference(image)
	return err == nil && strings.HasSuffix(ref.Context().RepositoryStr(), "tailscale/tailscale")
}

// pullImage pulls image for this machine's architecture from the test's
// registry, as a kubelet would, and unpacks its file system into root. It
// returns the image's config (entrypoint, command, env, user).
func (n *Node) pullImage(ctx context.Context, image, root string) (*v1.Config, error) {
	reg := n.o.Registry
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, err
	}
	if reg == nil || ref.Context().RegistryStr() != reg.Name() {
		return nil, fmt.Errorf("image %s: the test node pulls only from the test's registry", image)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithTransport(reg.Transport()),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if cf.Architecture != runtime.GOARCH {
		return nil, fmt.Errorf("image %s is for %s/%s, this node is linux/%s", image, cf.OS, cf.Architecture, runtime.GOARCH)
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	if err := untar(rc, root); err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", image, err)
	}
	return &cf.Config, nil
}

// untar writes a flattened image file system under root.
func untar(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		if p != root && !strings.HasPrefix(p, root+string(filepath.Separator)) {
			return fmt.Errorf("%s leaves the image root", h.Name)
		}
		// tar's own mapping of the header's mode bits, sticky bit included.
		mode := h.FileInfo().Mode() & (os.ModePerm | os.ModeSticky)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		default:
			// Hard links, devices: not in our images.
		}
	}
}

// imageUser is the image's USER as uid and gid ("65532:65532", "2000");
// names are not looked up.
func imageUser(cfg *v1.Config) (uid, gid int64) {
	if cfg == nil || cfg.User == "" {
		return 0, 0
	}
	u, g, _ := strings.Cut(cfg.User, ":")
	uid, _ = strconv.ParseInt(u, 10, 64)
	gid = uid
	if g != "" {
		gid, _ = strconv.ParseInt(g, 10, 64)
	}
	return uid, gid
}
