package xpkg

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/peerrelay/peerrelay/test/harness"
)

// TestSignatures runs the README's signing block (keygen, sign, verify)
// with xpkgsign built from this tree, against a registry holding this
// tree's packages as a release pushes them (each an index of its
// architectures). Then it plays what verify must refuse, each naming the
// package: a package never signed, a signed package changed and pushed
// under its tag with its signature copied beside it, and the release
// checked against another key.
func TestSignatures(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/peerrelay"
	pushIndex(t, repo+"/function-peerrelay:"+version, open(t, "function-peerrelay", "amd64"), open(t, "function-peerrelay", "arm64"))
	pushIndex(t, repo+"/provider-peerrelay:"+version, open(t, "provider-peerrelay", "amd64"), open(t, "provider-peerrelay", "arm64"))
	pushIndex(t, repo+"/configuration-peerrelay:"+version, open(t, "configuration-peerrelay", ""))

	bin := filepath.Join(t.TempDir(), "xpkgsign")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "hack/xpkgsign")).CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/xpkgsign: %v\n%s", err, out)
	}
	t.Setenv("COSIGN_PASSWORD", "release-manager's")
	dir := t.TempDir()
	xpkgsign := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, c := range harness.ReadmeBlock(t, root, "### Signatures") {
		if len(c.Args) < 3 || c.Args[0] != "go" || c.Args[1] != "run" || c.Args[2] != "./hack/xpkgsign" {
			t.Fatalf("README command %q: the test runs `go run ./hack/xpkgsign` only", c.Line)
		}
		args := c.Args[3:]
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "<registry>", repo)
		}
		out, err := xpkgsign(args...)
		t.Logf("$ %s\n%s", c.Line, out)
		if err != nil {
			t.Fatalf("README command %q failed: %v\n%s", c.Line, err, out)
		}
	}

	refused := func(why, ref, key, want string) {
		t.Helper()
		out, err := xpkgsign("verify", "-key", key, ref)
		t.Logf("%s: %s", why, out)
		if err == nil || !strings.Contains(out, ref) || !strings.Contains(out, want) {
			t.Errorf("%s: verify %s with %s: %v, want a refusal naming it and saying %q:\n%s", why, ref, key, err, want, out)
		}
	}
	provider := repo + "/provider-peerrelay:" + version
	// Never signed: the Configuration with one annotation more.
	unsigned := repo + "/configuration-peerrelay:unsigned"
	pushIndex(t, unsigned, mutate.Annotations(open(t, "configuration-peerrelay", ""), map[string]string{"changed": "yes"}).(v1.Image))
	refused("an unsigned package", unsigned, "cosign.pub", "no signatures found")
	// Changed after signing and pushed under the signed tag, its
	// signature copied to the new digest's signature tag.
	signedSig := signatureTag(t, provider)
	altered := mutate.Annotations(open(t, "provider-peerrelay", "amd64"), map[string]string{"io.example/injected": "yes"}).(v1.Image)
	pushIndex(t, provider, altered)
	sig, err := remote.Image(signedSig)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(signatureTag(t, provider), sig); err != nil {
		t.Fatal(err)
	}
	refused("a signed package changed, its signature copied", provider, "cosign.pub", "invalid or missing digest in claim")
	// Signed, but not by the key a platform trusts.
	other := t.TempDir()
	cmd := exec.Command(bin, "keygen")
	cmd.Dir = other
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	refused("another key", repo+"/function-peerrelay:"+version, filepath.Join(other, "cosign.pub"), "invalid signature")
	if _, err := os.Stat(filepath.Join(dir, "cosign.key")); err != nil {
		t.Errorf("keygen wrote no cosign.key: %v", err)
	}
}

// pushIndex pushes images as one image index, as a release pushes a
// package's architectures.
func pushIndex(t *testing.T, ref string, imgs ...v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture}}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// signatureTag is where cosign keeps the signatures of what ref names now:
// sha256-<hex>.sig in its repository.
func signatureTag(t *testing.T, ref string) name.Tag {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(r)
	if err != nil {
		t.Fatal(err)
	}
	return r.Context().Tag(d.Digest.Algorithm + "-" + d.Digest.Hex + ".sig")
}
