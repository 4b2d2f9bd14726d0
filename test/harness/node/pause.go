package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/test/harness"
)

// pauseTag is the pause image's tag: the version Kubernetes v1.36 pins.
const pauseTag = "3.10.1"

// pushPause pushes the pause program (make tools builds it from the
// kubernetes module) as the image ref in reg: the sandbox every pod's
// containers share namespaces with.
func pushPause(t testing.TB, reg Registry, ref, program string) {
	t.Helper()
	b, err := os.ReadFile(program)
	if err != nil {
		t.Fatal(err)
	}
	push(t, reg, ref, harness.OneFileImage(t, "pause", b, 0o755, runtime.GOARCH, "/pause"))
}

// registryTransport reaches reg by its host name at its address, trusting
// its CA.
func registryTransport(reg Registry) http.RoundTripper {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(reg.CA)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, reg.Addr)
		},
	}
}
