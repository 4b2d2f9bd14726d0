package tailnet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/ipn"
	"tailscale.com/tailcfg"

	"github.com/peerrelay/peerrelay/test/harness"
)

// Daemon is a tailscaled the test runs, in userspace networking: a
// harness.Process (its log, Pid, Exited) with its LocalAPI client.
type Daemon struct {
	*harness.Process
	LocalClient *local.Client
}

// DaemonOptions say how a tailscaled runs.
type DaemonOptions struct {
	// ConfigFile is its --config.
	ConfigFile string
	// ControlURL is the control server's, for the connectivity check.
	ControlURL string
	// Netns runs it in that network namespace (a test host); "" here.
	Netns string
	// User runs it as that user; nil as this process's.
	User *syscall.Credential
	// Env is added to its environment (TS_DEBUG_NEVER_DIRECT_UDP=1 keeps
	// a client off direct paths).
	Env []string
}

// StartDaemon runs tailscaled; it is stopped when the test ends, and its
// log shown if the test failed.
func StartDaemon(t testing.TB, o DaemonOptions) *Daemon {
	t.Helper()
	dir := t.TempDir()
	if o.User != nil {
		// The state folder must be the user's, as an emptyDir is the pod's.
		if err := os.Chown(dir, int(o.User.Uid), int(o.User.Gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "ts.sock")
	argv := []string{harness.Tool(t, "tailscaled"), "--tun=userspace-networking", "--statedir=" + dir, "--socket=" + sock, "--port=0", "--config=" + o.ConfigFile}
	if o.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", o.Netns}, argv...)
	}
	env := []string{"TS_DISABLE_PORTMAPPER=1", "TS_NO_LOGS_NO_SUPPORT=true", "TS_LOGS_DIR=" + dir, "TS_ASSUME_NETWORK_UP_FOR_TEST=1"}
	if o.ControlURL != "" {
		env = append(env, "TS_NETCHECK_GENERATE_204_URL="+o.ControlURL+"/generate_204")
	}
	p := harness.StartProcess(t, "tailscaled "+o.ConfigFile, argv[0], argv[1:], append(env, o.Env...), o.User)
	return &Daemon{Process: p, LocalClient: &local.Client{Socket: sock, UseSocketOnly: true}}
}

// ClientConfig writes a plain client's config (no relay, logging in with a
// test key to controlURL) and returns its file.
func ClientConfig(t testing.TB, controlURL, hostname string) string {
	t.Helper()
	key := "tskey-auth-client"
	b, err := json.Marshal(ipn.ConfigVAlpha{Version: "alpha0", Locked: "false", ServerURL: &controlURL, AuthKey: &key, Hostname: &hostname, AcceptDNS: "false", AcceptRoutes: "false"})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), hostname+".json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// StartClient runs a plain client named hostname logged in to tn, in
// network namespace netns ("" for here); env is added to its environment.
func (tn *Tailnet) StartClient(t testing.TB, netns, hostname string, env ...string) *Daemon {
	t.Helper()
	return StartDaemon(t, DaemonOptions{ConfigFile: ClientConfig(t, tn.URL, hostname), ControlURL: tn.URL, Netns: netns, Env: env})
}

// WaitRunning waits until a tailscaled reaches Running with a tailnet
// address and returns its first.
func WaitRunning(t testing.TB, lc *local.Client, timeout time.Duration) netip.Addr {
	t.Helper()
	var ip netip.Addr
	harness.Eventually(t, timeout, "tailscaled Running", func(context.Context) error {
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
	harness.Eventually(t, timeout, "a disco ping to "+to.String()+" through a peer relay", func(context.Context) error {
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
