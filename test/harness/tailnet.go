package harness

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/ipn"
	"tailscale.com/tailcfg"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"
)

// ControlHost is the name of Tailscale's control server, the one a
// tailscaled config without ServerURL logs in to.
const ControlHost = "controlplane.tailscale.com"

// Tailnet is Tailscale's control plane as the node's pods see it: a
// testcontrol server answering as controlplane.tailscale.com (HTTPS with a
// certificate from a CA the node's pods trust, and plain HTTP on port 80,
// which tailscaled tries first), and DERP and STUN, all on the node's
// services address. Nothing leaves the machine.
type Tailnet struct {
	Control *testcontrol.Server
	// URL is the same control server by address, for the test's own
	// clients, which do not have the pods' hosts and trust.
	URL string
}

// StartTailnet starts the control plane and tells the node's pods where it
// is; start it before the pods that use it.
func (n *Node) StartTailnet(t testing.TB) *Tailnet {
	t.Helper()
	addr := n.net.Services.String()
	derpMap := integration.RunDERPAndSTUN(t, func(string, ...any) {}, addr)
	control := &testcontrol.Server{DERPMap: derpMap, PeerRelayGrants: true, AllOnline: true, Logf: func(string, ...any) {}}
	serverTLS, ca := tlsServer(t, "test-public-ca", []string{ControlHost}, []net.IP{net.ParseIP(addr)})
	// testcontrol crashes the test binary on a path it does not know; real
	// clients ask Tailscale's servers for more (bootstrap DNS, logs), which
	// a control server may refuse.
	mux := http.NewServeMux()
	for _, p := range []string{"/generate_204", "/key", "/machine/", "/ts2021", "/c2n/"} {
		mux.Handle(p, control)
	}
	mux.HandleFunc("/", http.NotFound)
	serve := func(port string, tlsConfig *tls.Config) {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, port))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(mux)
		_ = srv.Listener.Close()
		srv.Listener = l
		if tlsConfig != nil {
			srv.TLS = tlsConfig
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
	}
	serve("80", nil)
	serve("443", serverTLS)
	n.mu.Lock()
	n.o.Hosts = append(n.o.Hosts, addr+"\t"+ControlHost)
	n.o.TrustedCA = append(n.o.TrustedCA, ca...)
	n.mu.Unlock()
	return &Tailnet{Control: control, URL: "http://" + addr}
}

// Client is a plain tailscaled (userspace networking) on a test host of
// its own on the node's network, logged in to the tailnet.
type Client struct {
	LocalClient *local.Client
	IP          netip.Addr
	Log         *SyncBuffer
}

// StartClient runs a client named hostname; env is added to its
// environment (TS_DEBUG_NEVER_DIRECT_UDP=1 keeps it off direct paths).
func (n *Node) StartClient(t testing.TB, tn *Tailnet, hostname string, env ...string) *Client {
	t.Helper()
	ns, addr, err := n.net.add()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNetns(ns) })
	dir := t.TempDir()
	key := "tskey-auth-client"
	cfg, err := json.Marshal(ipn.ConfigVAlpha{Version: "alpha0", Locked: "false", ServerURL: &tn.URL, AuthKey: &key, Hostname: &hostname, AcceptDNS: "false", AcceptRoutes: "false"})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "ts.sock")
	cmd := exec.Command("ip", "netns", "exec", ns, Tool(t, "tailscaled"), "--tun=userspace-networking",
		"--statedir="+dir, "--socket="+sock, "--port=0", "--config="+cfgFile)
	cmd.Env = append(os.Environ(), append([]string{"TS_NO_LOGS_NO_SUPPORT=true", "TS_LOGS_DIR=" + dir}, env...)...)
	c := &Client{LocalClient: &local.Client{Socket: sock, UseSocketOnly: true}, IP: addr, Log: &SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("---- client %s output ----\n%s", hostname, tail(c.Log.String(), 16<<10))
		}
	})
	return c
}

// WaitRunning waits until a tailscaled reaches Running with a tailnet
// address and returns its first.
func WaitRunning(t testing.TB, lc *local.Client, timeout time.Duration) netip.Addr {
	t.Helper()
	var ip netip.Addr
	Eventually(t, timeout, "tailscaled Running", func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := lc.Status(ctx)
		if err != nil {
			return err
		}
		if st.BackendState != ipn.Running.String() || len(st.TailscaleIPs) == 0 {
			return fmt.Errorf("backend state %s, addresses %v", st.BackendState, st.TailscaleIPs)
		}
		ip = st.TailscaleIPs[0]
		return nil
	})
	return ip
}

// PingThroughPeerRelay disco-pings to from lc until a pong comes back
// through a peer relay, and returns the relay's endpoint as the ping
// reports it (address:port:vni:N).
func PingThroughPeerRelay(t testing.TB, lc *local.Client, to netip.Addr, timeout time.Duration) string {
	t.Helper()
	var via string
	Eventually(t, timeout, "a disco ping to "+to.String()+" through a peer relay", func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := lc.Ping(ctx, to, tailcfg.PingDisco)
		switch {
		case err != nil:
			return err
		case res.Err != "":
			return fmt.Errorf("ping: %s", res.Err)
		case res.PeerRelay == "":
			return fmt.Errorf("ping went %s / DERP %d, not through a peer relay", res.Endpoint, res.DERPRegionID)
		}
		via = res.PeerRelay
		return nil
	})
	return via
}
