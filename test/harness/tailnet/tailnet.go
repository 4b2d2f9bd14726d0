// Package tailnet is the one tailnet fixture of the tests: Tailscale's
// control plane (tailscale.com's testcontrol, with DERP and STUN from
// tstest/integration) and real tailscaled processes logged in to it. The
// e2e tests run it on loopback; the system tests run it on the test node's
// services address, answering as Tailscale's real control host. Nothing
// leaves the machine.
package tailnet

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"

	"github.com/peerrelay/peerrelay/test/harness"
)

// ControlHost is the name of Tailscale's control server, the one a
// tailscaled config without ServerURL logs in to.
const ControlHost = "controlplane.tailscale.com"

// Tailnet is a control server with DERP and STUN.
type Tailnet struct {
	Control *testcontrol.Server
	// URL is the control server by address (plain HTTP), for clients
	// given a ServerURL.
	URL string
	// CA signed the certificate the control server shows as ControlHost
	// (StartAsControlHost only): whoever reaches it by that name must
	// trust it.
	CA []byte
}

// newControl starts DERP and STUN on addr and a control server using them.
func newControl(t testing.TB, addr string) *testcontrol.Server {
	t.Helper()
	derpMap := integration.RunDERPAndSTUN(t, func(string, ...any) {}, addr)
	return &testcontrol.Server{DERPMap: derpMap, PeerRelayGrants: true, AllOnline: true, Logf: func(string, ...any) {}}
}

// Start serves the control plane on addr (an IP), the control server on a
// port of its own; it stops when the test ends.
func Start(t testing.TB, addr string) *Tailnet {
	t.Helper()
	control := newControl(t, addr)
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return &Tailnet{Control: control, URL: "http://" + serve(t, l, guard(control), nil)}
}

// StartAsControlHost serves the control plane on addr as ControlHost does:
// HTTPS on port 443 with a certificate from a CA of its own (Tailnet.CA),
// and plain HTTP on port 80, which tailscaled tries first. A tailscaled
// config without ServerURL logs in here once ControlHost resolves to addr.
func StartAsControlHost(t testing.TB, addr string) *Tailnet {
	t.Helper()
	control := newControl(t, addr)
	serverTLS, ca := harness.TLSServer(t, "test-public-ca", []string{ControlHost}, []net.IP{net.ParseIP(addr)})
	h := guard(control)
	for port, tlsConfig := range map[string]*tls.Config{"80": nil, "443": serverTLS} {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, port))
		if err != nil {
			t.Fatal(err)
		}
		serve(t, l, h, tlsConfig)
	}
	return &Tailnet{Control: control, URL: "http://" + addr, CA: ca}
}

// guard passes control only the paths it knows: testcontrol crashes the
// test binary on any other, and real clients ask Tailscale's servers for
// more (bootstrap DNS, logs), which a control server may refuse.
func guard(control http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/generate_204", "/key", "/machine/", "/ts2021", "/c2n/"} {
		mux.Handle(p, control)
	}
	mux.HandleFunc("/", http.NotFound)
	return mux
}

// serve serves h on l until the test ends, with TLS when tlsConfig is set,
// and returns its address.
func serve(t testing.TB, l net.Listener, h http.Handler, tlsConfig *tls.Config) string {
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = l
	if tlsConfig != nil {
		srv.TLS = tlsConfig
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return l.Addr().String()
}
