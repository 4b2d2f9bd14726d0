package crossplane

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"tailscale.com/net/udprelay/status"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/tailnet"
)

// TestDemo is `make demo`: the README's install on this machine, then what
// a user watches (the PeerRelay until PeerRelayReady, then two clients
// pinging each other through it), printed as it happens. Everything it
// started is stopped and removed when it ends.
func TestDemo(t *testing.T) {
	if os.Getenv("PEERRELAY_DEMO") == "" {
		t.Skip("make demo runs this")
	}
	say := func(format string, a ...any) { fmt.Printf(format+"\n", a...) }
	began := time.Now()
	say("Starting kube-apiserver, etcd, kube-controller-manager, Crossplane core v2.4.0, a node that runs pods\nwith containerboot and tailscaled, and a Tailscale control server (testcontrol) on this machine...")
	s := start(t, options{})
	say("… up in %v.\n", time.Since(began).Round(time.Second))
	ctx := t.Context()

	var applied time.Time
	for _, c := range readmeBlock(t, "## Install on a cluster") {
		if c.Args[0] == "kubectl" && len(c.Args) > 3 && c.Args[3] == "wait" {
			break // the watching is done below, as a user would
		}
		args := make([]string, len(c.Args)-1)
		for i, a := range c.Args[1:] {
			args[i] = strings.ReplaceAll(a, "<registry>", registryName)
		}
		var out string
		var err error
		if c.Args[0] == "crossplane" {
			out, err = s.CLI(t, args...)
		} else {
			out, err = s.Kubectl(t, args...)
		}
		say("$ %s\n%s", c.Line, strings.TrimRight(out, "\n"))
		if err != nil {
			t.Fatalf("%s: %v", c.Line, err)
		}
		if strings.Contains(c.Line, "apply -f examples/peerrelay.yaml") {
			applied = time.Now()
		}
	}

	say("\n$ kubectl -n team-a get peerrelay my-relay   (every second, until PeerRelayReady)")
	s.watchTable(t, say, applied, 5*time.Minute, "PeerRelayReady", func(table string, _ []string) bool {
		return strings.Contains(table, " "+string(v1alpha1.ReasonReady)+" ") && strings.Contains(table, "True     True")
	})
	ready := time.Since(applied)
	say("\nkubectl apply → PeerRelayReady: %v", ready.Round(100*time.Millisecond))
	out, _ := s.Kubectl(t, "-n", "team-a", "get", "pods")
	say("\n$ kubectl -n team-a get pods\n%s", strings.TrimSpace(out))

	say("\nThe load balancers' addresses start forwarding to the pods (the cloud's part), and the provider config\nturns the reachability probe on: the provider joins the tailnet and knocks on each advertised address.")
	s.loadBalancers(ctx, t, "team-a", "my-relay", "203.0.113.10", "203.0.113.11")
	s.probing(ctx, t, fmt.Sprintf(`{"apiVersion":%q,"kind":"ClusterProviderConfig","metadata":{"name":"default"},"spec":{"resolveTimeout":"5s"}}`, relayAPI))
	s.watchTable(t, say, time.Now(), 3*time.Minute, "REACHABLE 2/2", func(_ string, row []string) bool {
		return len(row) > 3 && row[3] == "2/2"
	})

	say("\nTwo tailnet clients that may not use direct UDP (TS_DEBUG_NEVER_DIRECT_UDP=1) ping each other:")
	a := s.client(ctx, t, "client-a", "team-a", "my-relay")
	b := s.client(ctx, t, "client-b", "team-a", "my-relay")
	tailnet.WaitRunning(t, a.LocalClient, time.Minute)
	bIP := tailnet.WaitRunning(t, b.LocalClient, time.Minute)
	via := tailnet.PingThroughPeerRelay(t, a.LocalClient, bIP, 90*time.Second)
	say("  client-a → %s (client-b): pong through peer relay %s", bIP, via)
	for i := range 2 {
		pod := fmt.Sprintf("my-relay-%d-0", i)
		st, err := s.localClient(t, "team-a", pod).DebugPeerRelaySessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var bound []status.ServerSession
		for _, ss := range st.Sessions {
			if ss.Client1.Endpoint.IsValid() && ss.Client2.Endpoint.IsValid() {
				bound = append(bound, ss)
			}
		}
		say("  relay %s: %d session(s) with both clients bound, %d allocation(s) not bound (the prober's, until they lapse)", pod, len(bound), len(st.Sessions)-len(bound))
		for _, ss := range bound {
			for _, c := range []struct {
				name string
				info status.ClientInfo
			}{{"client 1", ss.Client1}, {"client 2", ss.Client2}} {
				say("    VNI %d, %s at %s: sent %d packets, %d bytes through it", ss.VNI, c.name, c.info.Endpoint, c.info.PacketsTx, c.info.BytesTx)
			}
		}
	}
	say("\nDone in %v; stopping everything and removing what was created.", time.Since(began).Round(time.Second))
}

// watchTable prints `kubectl get peerrelay my-relay` in team-a each time
// it changes, with the time since start, and PeerRelayReady's reason when
// that changes too, until done says so of the table (and its row's
// fields).
func (s *system) watchTable(t *testing.T, say func(string, ...any), start time.Time, timeout time.Duration, what string, done func(table string, row []string) bool) {
	t.Helper()
	last, lastMsg := "", ""
	harness.Eventually(t, timeout, what, func(ctx context.Context) error {
		out, err := s.Kubectl(t, "-n", "team-a", "get", "peerrelay", "my-relay")
		if err != nil {
			return err
		}
		if shown := withoutAge(out); shown != last {
			say("%6.1fs  %s", time.Since(start).Seconds(), strings.ReplaceAll(strings.TrimSpace(out), "\n", "\n        "))
			last = shown
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if done(out, strings.Fields(lines[len(lines)-1])) {
			return nil
		}
		if pr, err := s.Get(ctx, v2API, "PeerRelay", "team-a", "my-relay"); err == nil {
			if _, msg := condition(pr, v1alpha1.ConditionPeerRelayReady); msg != lastMsg && msg != "no condition" {
				say("        PeerRelayReady %s", msg)
				lastMsg = msg
			}
		}
		time.Sleep(time.Second)
		return fmt.Errorf("not yet: %s", what)
	})
}

// withoutAge drops a table's last column, AGE, which changes every second.
func withoutAge(table string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(l)
		b.WriteString(strings.Join(f[:max(len(f)-1, 0)], " ") + "\n")
	}
	return b.String()
}
