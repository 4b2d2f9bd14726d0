package crossplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/peerrelay/peerrelay/test/harness"
)

// Registry is an OCI registry (go-containerregistry's) that answers as a
// public registry host, for instance xpkg.crossplane.io, over HTTPS on port
// 443 of a loopback address of its own: the tests push our .xpkg files
// under their real names, Crossplane pulls them by those names (its DNS
// sends the host here, its CA bundle trusts CA), and so does the test node.
type Registry struct {
	// Host is the registry host the packages are named under.
	Host string
	// Addr is where it listens (IP:443).
	Addr string
	// CA is the PEM certificate of the CA that signed its certificate.
	CA []byte

	transport http.RoundTripper
}

// StartRegistry starts an empty registry answering as host; it stops when
// the test ends.
func StartRegistry(t testing.TB, host string) *Registry {
	t.Helper()
	ip, _, _ := net.SplitHostPort(harness.LoopbackAddress())
	serverTLS, ca := harness.TLSServer(t, "test-registry-ca", []string{host}, []net.IP{net.ParseIP(ip)})
	r := &Registry{Host: host, Addr: net.JoinHostPort(ip, "443"), CA: ca}
	l, err := net.Listen("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	_ = srv.Listener.Close()
	srv.Listener = l
	srv.TLS = serverTLS
	srv.StartTLS()
	t.Cleanup(srv.Close)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	r.transport = &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == net.JoinHostPort(host, "443") {
				addr = r.Addr
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	return r
}

// Name is the host the registry answers as.
func (r *Registry) Name() string { return r.Host }

// Transport reaches the registry by its host name, trusting its CA.
func (r *Registry) Transport() http.RoundTripper { return r.transport }

// Push pushes the package files at paths as repo:tag and returns the full
// reference. Several files (one per architecture) are pushed as one image
// index, as `crossplane xpkg push -f a.xpkg,b.xpkg` does.
func (r *Registry) Push(t testing.TB, repo, tag string, paths ...string) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	var imgs []v1.Image
	var adds []mutate.IndexAddendum
	for _, path := range paths {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			t.Fatalf("cannot read package %s: %v", path, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatalf("package %s: %v", path, err)
		}
		imgs = append(imgs, img)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
		}})
	}
	switch len(imgs) {
	case 0:
		t.Fatalf("no package files to push to %s", ref)
	case 1:
		err = remote.Write(ref, imgs[0], remote.WithTransport(r.transport))
	default:
		idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
		err = remote.WriteIndex(ref, idx, remote.WithTransport(r.transport))
	}
	if err != nil {
		t.Fatalf("cannot push %s: %v", ref, err)
	}
	return ref.String()
}

// PushProgram builds the Go command pkg for this machine, statically, and
// pushes an image of it alone (at /program, run as 65532 with args) as
// repo:tag. It returns the full reference.
func (r *Registry) PushProgram(t testing.TB, repo, tag, pkg string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "program")
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	program, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img := harness.OneFileImage(t, "program", program, 0o755, runtime.GOARCH, append([]string{"/program"}, args...)...)
	ref, err := name.ParseReference(r.Host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(r.transport)); err != nil {
		t.Fatalf("cannot push %s: %v", ref, err)
	}
	return ref.String()
}
