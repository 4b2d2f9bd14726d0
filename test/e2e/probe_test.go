package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/provider/probe"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// TestProbeReachesRelay: a prober that joins the tailnet gets an endpoint
// allocated by a real relay running our config and hears the relay's
// challenge at the address the relay advertises; at an address where
// packets are dropped it hears nothing and says so.
func TestProbeReachesRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := startWorld(t)
	port := w.addRelay(t, "127.0.0.1")
	cfgFile := filepath.Join(t.TempDir(), tsconfig.FileName)
	waitForConfig(t, w.provider, cfgFile, []string{fmt.Sprintf("127.0.0.1:%d", port)})
	relay := w.startTailscaled(t, cfgFile, nil)
	tailnet.WaitRunning(t, relay.LocalClient, time.Minute)
	st, err := relay.LocalClient.StatusWithoutPeers(ctx)
	must(t, err)

	p, err := probe.Join(ctx, probe.Options{ControlURL: w.URL, AuthKey: "tskey-auth-probe", Hostname: "peerrelay-probe", Logf: t.Logf})
	must(t, err)
	defer p.Close()

	advertised := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	if err := p.Probe(ctx, st.Self.ID, advertised, 30*time.Second); err != nil {
		t.Fatalf("probe of the advertised %s: %v", advertised, err)
	}

	// A black hole: a socket that reads and never answers, as a wrong-zone
	// Elastic IP or a firewall that drops does.
	hole, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must(t, err)
	defer func() { _ = hole.Close() }()
	dropped := hole.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := p.Probe(ctx, st.Self.ID, dropped, 5*time.Second); !errors.Is(err, probe.ErrNoAnswer) {
		t.Errorf("probe of %s, which drops everything: got %v, want %v", dropped, err, probe.ErrNoAnswer)
	}

	if err := p.Probe(ctx, "nope", advertised, 5*time.Second); !errors.Is(err, probe.ErrNotInNetmap) {
		t.Errorf("probe of an unknown device: got %v, want %v", err, probe.ErrNotInNetmap)
	}
}
