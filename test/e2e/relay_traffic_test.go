package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
)

// clientConfig is a plain tailnet client's config: no relay.
func clientConfig(t *testing.T, controlURL, hostname string) string {
	t.Helper()
	key := "tskey-auth-client"
	c := ipn.ConfigVAlpha{Version: "alpha0", Locked: "false", ServerURL: &controlURL, AuthKey: &key, Hostname: &hostname, AcceptDNS: "false", AcceptRoutes: "false"}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "client.json")
	must(t, os.WriteFile(f, b, 0o600))
	return f
}

// TestRelayCarriesTraffic: two clients that may not use direct UDP reach
// each other through the relay node running our config, and the disco ping
// names the relay endpoint we advertised.
func TestRelayCarriesTraffic(t *testing.T) {
	bin := harness.Tool(t, "tailscaled")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tn := startTailnet(t)
	controlSrv, pe := tn.server, tn.provider
	// The relay's "public" address is loopback here: the clients can reach it.
	port := tn.addRelay(t, "127.0.0.1")
	cfgFile := filepath.Join(t.TempDir(), tsconfig.FileName)
	relayEP := fmt.Sprintf("127.0.0.1:%d", port)
	waitForConfig(t, pe, cfgFile, []string{relayEP})
	relay := startTailscaled(t, bin, controlSrv.URL, cfgFile)
	waitRunning(t, relay)

	t.Setenv("TS_DEBUG_NEVER_DIRECT_UDP", "1") // inherited by the clients only
	a := startTailscaled(t, bin, controlSrv.URL, clientConfig(t, controlSrv.URL, "client-a"))
	b := startTailscaled(t, bin, controlSrv.URL, clientConfig(t, controlSrv.URL, "client-b"))
	waitRunning(t, a)
	bIP := waitRunning(t, b)

	via := harness.PingThroughPeerRelay(t, a.lc, bIP, time.Minute)
	// This machine's interface address is a candidate too and may win the
	// race against the loopback endpoint we advertised; what matters here is
	// that the path is our relay, on the port our config gave it.
	// (TestRealTailscaledRunsOurConfig checks the advertised endpoints.)
	if !strings.HasSuffix(strings.Split(via, ":vni:")[0], fmt.Sprintf(":%d", port)) {
		t.Errorf("the ping went through %s, not our relay's port %d", via, port)
	}
	sessions, err := relay.lc.DebugPeerRelaySessions(ctx)
	must(t, err)
	if len(sessions.Sessions) == 0 {
		t.Errorf("the relay reports no sessions: %+v", sessions)
	}
}

func waitRunning(t *testing.T, ts *tailscaled) netipAddr {
	t.Helper()
	return harness.WaitRunning(t, ts.lc, time.Minute)
}
