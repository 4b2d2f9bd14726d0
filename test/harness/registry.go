package harness

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is an OCI registry on loopback (go-containerregistry's), where
// the tests push our .xpkg files for Crossplane to pull. Crossplane speaks
// plain HTTP to a 127.0.0.1 registry.
type Registry struct {
	// Host is 127.0.0.1:PORT.
	Host string
}

// StartRegistry starts an empty registry; it stops when the test ends.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://")}
}

// Push pushes the package file at path as repo:tag and returns the full
// reference.
func (r *Registry) Push(t testing.TB, path, repo, tag string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("cannot read package %s: %v", path, err)
	}
	ref, err := name.ParseReference(r.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("cannot push %s: %v", ref, err)
	}
	return ref.String()
}
