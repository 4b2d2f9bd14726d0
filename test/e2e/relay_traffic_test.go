package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// TestRelayCarriesTraffic: two clients that may not use direct UDP reach
// each other through the relay node running our config, and the disco ping
// names the relay endpoint we advertised.
func TestRelayCarriesTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := startWorld(t)
	// The relay's "public" address is loopback here: the clients can reach it.
	port, relay := w.runRelay(t, "127.0.0.1")

	a := w.StartClient(t, "", "client-a", "TS_DEBUG_NEVER_DIRECT_UDP=1")
	b := w.StartClient(t, "", "client-b", "TS_DEBUG_NEVER_DIRECT_UDP=1")
	tailnet.WaitRunning(t, a.LocalClient, time.Minute)
	bIP := tailnet.WaitRunning(t, b.LocalClient, time.Minute)

	via := tailnet.PingThroughPeerRelay(t, a.LocalClient, bIP, time.Minute)
	// This machine's interface address is a candidate too and may win the
	// race against the loopback endpoint we advertised; what matters here is
	// that the path is our relay, on the port our config gave it.
	// (TestRealTailscaledRunsOurConfig checks the advertised endpoints.)
	if !strings.HasSuffix(strings.Split(via, ":vni:")[0], fmt.Sprintf(":%d", port)) {
		t.Errorf("the ping went through %s, not our relay's port %d", via, port)
	}
	sessions, err := relay.LocalClient.DebugPeerRelaySessions(ctx)
	must(t, err)
	if len(sessions.Sessions) == 0 {
		t.Errorf("the relay reports no sessions: %+v", sessions)
	}
}
