package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go4.org/mem"
	"tailscale.com/derp/derphttp"
	"tailscale.com/derp/derpserver"
	"tailscale.com/disco"
	"tailscale.com/metrics"
	"tailscale.com/net/netmon"
	"tailscale.com/net/packet"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
	"tailscale.com/types/logger"
	"tailscale.com/types/netmap"
)

// seal is a disco packet from one key to another, framed as
// tailscale.com/disco frames it: magic, sender's key, sealed message.
func seal(from key.DiscoPrivate, to key.DiscoPublic, m disco.Message) []byte {
	b := append([]byte(disco.Magic), from.Public().AppendTo(nil)...)
	return append(b, from.Shared(to).Seal(m.AppendMarshal(nil))...)
}

// geneve prefixes a disco packet with a Geneve control header for vni, as
// a relay server frames its challenge.
func geneve(vni uint32, control bool, b []byte) []byte {
	gh := packet.GeneveHeader{Control: control, Protocol: packet.GeneveProtocolDisco}
	gh.VNI.Set(vni)
	hdr := make([]byte, packet.GeneveFixedHeaderLength)
	if err := gh.Encode(hdr); err != nil {
		panic(err)
	}
	return append(hdr, b...)
}

func challenge(vni, gen uint32) *disco.BindUDPRelayEndpointChallenge {
	return &disco.BindUDPRelayEndpointChallenge{BindUDPRelayEndpointCommon: disco.BindUDPRelayEndpointCommon{VNI: vni, Generation: gen}}
}

func TestIsChallenge(t *testing.T) {
	server, client, other := key.NewDisco(), key.NewDisco(), key.NewDisco()
	const vni, gen = 7, 42
	valid := geneve(vni, true, seal(server, client.Public(), challenge(vni, gen)))
	bind := &disco.BindUDPRelayEndpoint{BindUDPRelayEndpointCommon: disco.BindUDPRelayEndpointCommon{VNI: vni, Generation: gen}}
	cases := map[string]struct {
		reason string
		b      []byte
		want   bool
	}{
		"Valid":           {reason: "The relay server's challenge to our bind.", b: valid, want: true},
		"HeaderVNI":       {reason: "A Geneve header for another endpoint.", b: geneve(vni+1, true, seal(server, client.Public(), challenge(vni, gen)))},
		"SealedVNI":       {reason: "A challenge for another endpoint under our header.", b: geneve(vni, true, seal(server, client.Public(), challenge(vni+1, gen)))},
		"Generation":      {reason: "A challenge to an earlier bind.", b: geneve(vni, true, seal(server, client.Public(), challenge(vni, gen+1)))},
		"OtherKey":        {reason: "Sealed by a key that is not the relay's.", b: geneve(vni, true, seal(other, client.Public(), challenge(vni, gen)))},
		"NotForUs":        {reason: "Sealed by the relay to another client.", b: geneve(vni, true, seal(server, other.Public(), challenge(vni, gen)))},
		"NotControl":      {reason: "A Geneve data packet is no challenge.", b: geneve(vni, false, seal(server, client.Public(), challenge(vni, gen)))},
		"EchoedBind":      {reason: "A reflector echoing our own bind opens under the same shared key, but is not a challenge.", b: geneve(vni, true, seal(client, server.Public(), bind))},
		"Truncated":       {reason: "A challenge cut short does not open.", b: valid[:len(valid)-3]},
		"TruncatedHeader": {reason: "Less than a Geneve header.", b: valid[:5]},
		"NoDisco":         {reason: "A Geneve header and no disco packet.", b: valid[:packet.GeneveFixedHeaderLength+4]},
		"Garbage":         {reason: "Bytes that merely look long enough.", b: bytes.Repeat([]byte{0xa5}, len(valid))},
		"Empty":           {reason: "An empty datagram.", b: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := isChallenge(tc.b, client.Shared(server.Public()), vni, gen); got != tc.want {
				t.Errorf("%s\nisChallenge(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestSealed(t *testing.T) {
	ours, theirs := key.NewDisco(), key.NewDisco()
	payload := (&disco.Pong{TxID: [12]byte{1, 2, 3}}).AppendMarshal(nil)
	prefix := []byte{9, 9}
	b := sealed(bytes.Clone(prefix), ours, theirs.Public(), payload)
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("sealed dropped the prefix it was given: % x", b[:2])
	}
	// Open it as the relay server does (net/udprelay's handleSealedDiscoControlMsg).
	b = b[len(prefix):]
	raw, ok := disco.Source(b)
	if !ok || !bytes.Equal(raw, ours.Public().AppendTo(nil)) {
		t.Fatalf("disco.Source = %x, %v, want our public key", raw, ok)
	}
	clear, ok := theirs.Shared(ours.Public()).Open(b[len(disco.Magic)+key.DiscoPublicRawLen:])
	if !ok || !bytes.Equal(clear, payload) {
		t.Errorf("the recipient opened %x, %v, want %x", clear, ok, payload)
	}
}

// device is a tailnet peer with its node and disco keys.
type device struct {
	id    tailcfg.StableNodeID
	node  key.NodePrivate
	disco key.DiscoPrivate
}

func newDevice(id tailcfg.StableNodeID) device {
	return device{id: id, node: key.NewNode(), disco: key.NewDisco()}
}

// prober is a Prober with a netmap holding peers, and no control or DERP.
func prober(peers ...device) *Prober {
	p := &Prober{disco: key.NewDisco(), waiters: map[uint32]waiter{}, ready: make(chan struct{})}
	nm := &netmap.NetworkMap{}
	for _, d := range peers {
		nm.Peers = append(nm.Peers, (&tailcfg.Node{StableID: d.id, Key: d.node.Public(), DiscoKey: d.disco.Public()}).View())
	}
	p.UpdateFullNetmap(nm)
	return p
}

func TestPeer(t *testing.T) {
	relay, other := newDevice("relay"), newDevice("other")
	p := prober(relay, other)
	select {
	case <-p.ready:
	default:
		t.Error("UpdateFullNetmap did not mark the prober ready")
	}
	cases := map[string]struct {
		reason string
		p      *Prober
		id     tailcfg.StableNodeID
		want   key.NodePublic
	}{
		"Found":    {reason: "A device in the netmap is found by its stable ID.", p: p, id: "relay", want: relay.node.Public()},
		"Other":    {reason: "Each device is found under its own ID.", p: p, id: "other", want: other.node.Public()},
		"Missing":  {reason: "An ID not in the netmap is not found.", p: p, id: "nope"},
		"NoNetmap": {reason: "Before the first netmap nothing is found.", p: &Prober{}, id: "relay"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, ok := tc.p.Peer(tc.id)
			if ok != !tc.want.IsZero() || (ok && n.Key() != tc.want) {
				t.Errorf("%s\nPeer(%q) = %v, %v, want %v", tc.reason, tc.id, n.Key(), ok, tc.want)
			}
		})
	}
}

func TestOpenAllocation(t *testing.T) {
	relay, other, stranger := newDevice("relay"), newDevice("other"), newDevice("stranger")
	p := prober(relay, other)
	answer := &disco.AllocateUDPRelayEndpointResponse{Generation: 42, UDPRelayEndpoint: disco.UDPRelayEndpoint{ServerDisco: key.NewDisco().Public(), VNI: 7, AddrPorts: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:7777")}}}
	valid := seal(relay.disco, p.disco.Public(), answer)
	// Claims the relay's disco key but is sealed by another.
	forged := append(append([]byte(disco.Magic), relay.disco.Public().AppendTo(nil)...), stranger.disco.Shared(p.disco.Public()).Seal(answer.AppendMarshal(nil))...)
	cases := map[string]struct {
		reason string
		from   key.NodePublic
		b      []byte
		want   bool
	}{
		"FromRelay":               {reason: "The relay's answer, sealed under the disco key the netmap gives it.", from: relay.node.Public(), b: valid, want: true},
		"UnknownNode":             {reason: "A node not in the netmap.", from: stranger.node.Public(), b: seal(stranger.disco, p.disco.Public(), answer)},
		"RelayDiscoOverOtherNode": {reason: "The relay's disco key arriving from another node's DERP connection.", from: other.node.Public(), b: valid},
		"OtherPeersDisco":         {reason: "A peer's node key with another peer's disco key.", from: relay.node.Public(), b: seal(other.disco, p.disco.Public(), answer)},
		"UnknownDisco":            {reason: "A disco key the netmap does not give the node.", from: relay.node.Public(), b: seal(stranger.disco, p.disco.Public(), answer)},
		"Forged":                  {reason: "Claims the relay's disco key, sealed by another.", from: relay.node.Public(), b: forged},
		"NotForUs":                {reason: "Sealed by the relay to another disco key.", from: relay.node.Public(), b: seal(relay.disco, other.disco.Public(), answer)},
		"NotAnAllocation":         {reason: "Another disco message from the relay.", from: relay.node.Public(), b: seal(relay.disco, p.disco.Public(), &disco.Pong{})},
		"Truncated":               {reason: "An answer cut short.", from: relay.node.Public(), b: valid[:len(valid)-1]},
		"Garbage":                 {reason: "Not a disco packet.", from: relay.node.Public(), b: bytes.Repeat([]byte{1}, 100)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := p.openAllocation(tc.from, tc.b)
			if (got != nil) != tc.want || (got != nil && (got.Generation != answer.Generation || got.VNI != answer.VNI || got.ServerDisco != answer.ServerDisco)) {
				t.Errorf("%s\nopenAllocation(...) = %+v, want answer: %v", tc.reason, got, tc.want)
			}
		})
	}
}

// relayServer listens on loopback and answers a bind for vni and remote as
// a relay server's endpoint does, or as mode says otherwise: "silent"
// drops it, "echo" sends it back, "stale" challenges another generation,
// "otherPort" answers from another socket.
func relayServer(t *testing.T, server key.DiscoPrivate, vni uint32, remote key.DiscoPublic, mode string) netip.AddrPort {
	t.Helper()
	listen := func() *net.UDPConn {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	conn, out := listen(), listen()
	if mode != "otherPort" {
		out = conn
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			b := buf[:n]
			var gh packet.GeneveHeader
			if gh.Decode(b) != nil || !gh.Control || gh.VNI.Get() != vni {
				continue
			}
			b = b[packet.GeneveFixedHeaderLength:]
			raw, ok := disco.Source(b)
			if !ok {
				continue
			}
			sender := key.DiscoPublicFromRaw32(mem.B(raw))
			clear, ok := server.Shared(sender).Open(b[len(disco.Magic)+key.DiscoPublicRawLen:])
			if !ok {
				continue
			}
			m, err := disco.Parse(clear)
			bind, ok := m.(*disco.BindUDPRelayEndpoint)
			if err != nil || !ok || bind.VNI != vni || bind.RemoteKey != remote || bind.Generation == 0 {
				continue
			}
			reply := geneve(vni, true, seal(server, sender, challenge(vni, bind.Generation)))
			switch mode {
			case "silent":
				continue
			case "echo":
				reply = buf[:n]
			case "stale":
				reply = geneve(vni, true, seal(server, sender, challenge(vni, bind.Generation-1)))
			}
			_, _ = out.WriteToUDPAddrPort(reply, from)
		}
	}()
	return netip.MustParseAddrPort(conn.LocalAddr().String())
}

func TestKnock(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cases := map[string]struct {
		reason string
		mode   string
		want   error
	}{
		"Answers":   {reason: "The relay's challenge comes back from the address knocked on.", mode: "answer"},
		"Silent":    {reason: "A black hole: nothing comes back.", mode: "silent", want: ErrNoAnswer},
		"Echo":      {reason: "A reflector sending our bind back is not the relay.", mode: "echo", want: ErrNoAnswer},
		"Stale":     {reason: "A challenge to another bind generation is not ours.", mode: "stale", want: ErrNoAnswer},
		"OtherPort": {reason: "A challenge from another port than the one knocked on proves nothing about it.", mode: "otherPort", want: ErrNoAnswer},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, server, remote := prober(), key.NewDisco(), key.NewDisco().Public()
			alloc := &disco.AllocateUDPRelayEndpointResponse{UDPRelayEndpoint: disco.UDPRelayEndpoint{ServerDisco: server.Public(), VNI: 7}}
			addr := relayServer(t, server, alloc.VNI, remote, tc.mode)
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			start := time.Now()
			err := p.knock(ctx, alloc, remote, addr)
			if !errors.Is(err, tc.want) {
				t.Errorf("%s\nknock(...) = %v, want %v", tc.reason, err, tc.want)
			}
			if took := time.Since(start); took > timeout+200*time.Millisecond {
				t.Errorf("%s\nknock took %v with a %v timeout", tc.reason, took, timeout)
			}
		})
	}
}

// TestKnockCancelled: a probe cancelled without a deadline (a stopping
// provider) ends when cancelled, not at the end of a second-long read.
func TestKnockCancelled(t *testing.T) {
	server, remote := key.NewDisco(), key.NewDisco().Public()
	alloc := &disco.AllocateUDPRelayEndpointResponse{UDPRelayEndpoint: disco.UDPRelayEndpoint{ServerDisco: server.Public(), VNI: 7}}
	addr := relayServer(t, server, alloc.VNI, remote, "silent")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := prober().knock(ctx, alloc, remote, addr)
	if took := time.Since(start); !errors.Is(err, ErrNoAnswer) || took > 300*time.Millisecond {
		t.Errorf("a probe cancelled after 100ms (no deadline) returned %v after %v, want %v promptly", err, took, ErrNoAnswer)
	}
}

func TestDeliver(t *testing.T) {
	relay, other, stranger := newDevice("relay"), newDevice("other"), newDevice("stranger")
	const gen = 42
	cases := map[string]struct {
		reason string
		from   device
		gen    uint32
		want   bool
	}{
		"Asked":      {reason: "The relay's answer reaches the probe waiting for its generation.", from: relay, gen: gen, want: true},
		"Generation": {reason: "An answer for a generation nobody waits for is dropped.", from: relay, gen: gen + 1},
		"Stranger":   {reason: "An answer from a node not in the netmap is dropped.", from: stranger, gen: gen},
		"OtherPeer":  {reason: "An answer from a netmap peer the probe did not ask is dropped, though its generation matches.", from: other, gen: gen},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := prober(relay, other)
			w := make(chan *disco.AllocateUDPRelayEndpointResponse, 1)
			p.waiters[gen] = waiter{peer: relay.node.Public(), answer: w}
			answer := &disco.AllocateUDPRelayEndpointResponse{Generation: tc.gen, UDPRelayEndpoint: disco.UDPRelayEndpoint{VNI: 7, AddrPorts: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:7777")}}}
			p.deliver(tc.from.node.Public(), seal(tc.from.disco, p.disco.Public(), answer))
			p.deliver(tc.from.node.Public(), seal(tc.from.disco, p.disco.Public(), answer)) // a repeat must not block
			if got := len(w) == 1; got != tc.want {
				t.Errorf("%s\ndelivered: %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestDERPShared: probes of a relay homed in a DERP region the prober has
// not used yet, started together, share one connection to it. The relay's
// answer comes back over it to the probe that asked.
// derpRegion starts a DERP server on loopback as region 900.
func derpRegion(t *testing.T) (*derpserver.Server, *tailcfg.DERPRegion, *tailcfg.DERPMap) {
	d := derpserver.New(key.NewNode(), logger.Discard)
	t.Cleanup(func() { _ = d.Close() })
	srv := httptest.NewUnstartedServer(derpserver.Handler(d))
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	region := &tailcfg.DERPRegion{RegionID: 900, Nodes: []*tailcfg.DERPNode{{Name: "900a", RegionID: 900, HostName: "127.0.0.1",
		IPv4: "127.0.0.1", IPv6: "none", DERPPort: srv.Listener.Addr().(*net.TCPAddr).Port, InsecureForTests: true}}}
	return d, region, &tailcfg.DERPMap{Regions: map[int]*tailcfg.DERPRegion{900: region}}
}

// dupConns is how many connections the DERP server accepted for a key it
// already had: a second connection of the prober's key, even one closed
// at once, makes the server drop packets for that key until it sees the
// close.
func dupConns(d *derpserver.Server) string {
	return d.ExpVar(false).(*metrics.Set).Get("counter_total_dup_client_conns").String()
}

// TestDERPConnectOutlivesProbe: a probe whose context ends while it
// connects gives up, but the connection goes on for the next probe,
// still one connection of the prober's key.
func TestDERPConnectOutlivesProbe(t *testing.T) {
	d, _, derpMap := derpRegion(t)
	p := prober(newDevice("relay"))
	p.node, p.logf, p.netMon, p.derps = key.NewNode(), logger.Discard, netmon.NewStatic(), map[int]*derphttp.Client{}
	t.Cleanup(func() {
		for _, c := range p.derps {
			_ = c.Close()
		}
	})
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	_, _ = p.derp(ended, derpMap, 900) // either outcome: it raced its own end
	var kept *derphttp.Client
	for deadline := time.Now().Add(5 * time.Second); kept == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		kept = p.derpClient(900)
	}
	if kept == nil {
		t.Fatal("the connection was abandoned with the probe whose context ended")
	}
	if c, err := p.derp(t.Context(), derpMap, 900); err != nil || c != kept {
		t.Errorf("the next probe got %p (%v), want the kept connection %p", c, err, kept)
	}
	if dups := dupConns(d); dups != "0" {
		t.Errorf("the DERP server accepted %s duplicate connections of the prober's key", dups)
	}
}

func TestDERPShared(t *testing.T) {
	d, region, derpMap := derpRegion(t)

	relay := newDevice("relay")
	p := prober(relay)
	p.node, p.logf, p.netMon, p.derps = key.NewNode(), logger.Discard, netmon.NewStatic(), map[int]*derphttp.Client{}
	got := make([]*derphttp.Client, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			c, err := p.derp(t.Context(), derpMap, 900)
			if err != nil {
				t.Error(err)
			}
			got[i] = c
		})
	}
	wg.Wait()
	for _, c := range got {
		if c != nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		if c != got[0] {
			t.Errorf("concurrent probes got DERP clients %p and %p for one region; the ones not kept in p.derps are never closed", got[0], c)
		}
	}
	if dups := dupConns(d); dups != "0" {
		t.Errorf("the DERP server accepted %s duplicate connections of the prober's key; concurrent probes must share one connection attempt", dups)
	}

	w := make(chan *disco.AllocateUDPRelayEndpointResponse, 1)
	p.waiters[42] = waiter{peer: relay.node.Public(), answer: w}
	rc := derphttp.NewRegionClient(relay.node, logger.Discard, netmon.NewStatic(), func() *tailcfg.DERPRegion { return region })
	t.Cleanup(func() { _ = rc.Close() })
	answer := &disco.AllocateUDPRelayEndpointResponse{Generation: 42, UDPRelayEndpoint: disco.UDPRelayEndpoint{VNI: 7, AddrPorts: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:7777")}}}
	// derphttp's Connect returns once the prober's key is sent; the server
	// registers it a moment later, and drops a packet to a key it does not
	// know yet. A probe's request goes over the same connection, so an answer
	// can follow only a registered key; the unasked answer here must wait
	// for it too (without this wait the test failed 2 runs in 100 under load).
	for deadline := time.Now().Add(5 * time.Second); !d.IsClientConnectedForTest(p.node.Public()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the DERP server never registered the prober's connection")
		}
	}
	if err := rc.Send(p.node.Public(), seal(relay.disco, p.disco.Public(), answer)); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-w:
		if resp.VNI != answer.VNI {
			t.Errorf("the probe got VNI %d over DERP, want %d", resp.VNI, answer.VNI)
		}
	case <-time.After(5 * time.Second):
		t.Error("the relay's answer sent over DERP did not reach the probe that asked")
	}
}
