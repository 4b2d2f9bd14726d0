// Package probe proves that a peer relay answers at an address it
// advertises, the way a tailnet client would find out.
//
// A relay server (tailscale.com/net/udprelay) answers nothing to a packet
// it did not expect: STUN requests and Geneve packets with an unknown VNI
// are dropped without a reply. A packet is expected only after a tailnet
// peer that the policy grants tailscale.com/cap/relay has asked the relay,
// over DERP, to allocate an endpoint for two disco keys. So the prober is a
// tailnet device of its own: it registers with the control server, keeps
// the netmap, asks the relay for an endpoint over DERP, and then sends the
// first message of the bind handshake to the advertised ip:port over plain
// UDP. The relay's challenge coming back proves that a UDP packet sent to
// that address reaches the relay server and its answer comes back. The
// prober never answers the challenge, so no session is opened and the
// allocation expires on the relay after its bind lifetime.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"tailscale.com/control/controlclient"
	"tailscale.com/derp/derphttp"
	"tailscale.com/disco"
	"tailscale.com/health"
	"tailscale.com/net/netmon"
	"tailscale.com/net/packet"
	"tailscale.com/net/tsdial"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
	"tailscale.com/types/logger"
	"tailscale.com/types/logid"
	"tailscale.com/types/netmap"
	"tailscale.com/types/persist"
	"tailscale.com/util/eventbus"
)

// Errors a probe can end with. Each says what a user would look at.
var (
	// ErrNoAllocation: the relay did not allocate an endpoint over DERP,
	// typically because the policy does not grant the prober
	// tailscale.com/cap/relay on it, or its relay server is not running.
	ErrNoAllocation = errors.New("the relay allocated no endpoint for the prober (is tailscale.com/cap/relay granted to the prober, and is the relay server running?)")
	// ErrNoAnswer: the relay allocated an endpoint, but nothing came back
	// from the advertised address.
	ErrNoAnswer = errors.New("no answer from the advertised address")
)

// Options say how the prober joins the tailnet.
type Options struct {
	// ControlURL of the control server, e.g. https://controlplane.tailscale.com.
	ControlURL string
	// AuthKey logs the prober in; it registers as an ephemeral device.
	AuthKey string
	// Hostname of the prober's device.
	Hostname string
	// Logf receives the tailscale libraries' logs; nil discards them.
	Logf logger.Logf
}

// waiter is a probe waiting for an allocation answer from the peer it asked.
type waiter struct {
	peer   key.NodePublic
	answer chan *disco.AllocateUDPRelayEndpointResponse
}

// Prober is a tailnet device that probes relays. Close it to log it out.
type Prober struct {
	logf    logger.Logf
	node    key.NodePrivate
	disco   key.DiscoPrivate
	netMon  *netmon.Monitor
	bus     *eventbus.Bus
	control *controlclient.Direct
	cancel  context.CancelFunc

	mu    sync.Mutex
	nm    *netmap.NetworkMap
	derps map[int]*derphttp.Client
	// connecting: one DERP connection attempt per region at a time.
	connecting singleflight.Group
	// closed: Close ran; a DERP client connected after it is closed at
	// once, not kept (it would never be closed).
	closed  bool
	waiters map[uint32]waiter
	home    int

	ready chan struct{}
	once  sync.Once
}

// Join registers the prober with the control server and waits for its
// first netmap.
func Join(ctx context.Context, o Options) (*Prober, error) {
	logf := o.Logf
	if logf == nil {
		logf = logger.Discard
	}
	p := &Prober{
		logf:    logf,
		node:    key.NewNode(),
		disco:   key.NewDisco(),
		netMon:  netmon.NewStatic(),
		bus:     eventbus.New(),
		derps:   map[int]*derphttp.Client{},
		waiters: map[uint32]waiter{},
		ready:   make(chan struct{}),
	}
	machine := key.NewMachine()
	logID, err := logid.NewPrivateID()
	if err != nil {
		return nil, fmt.Errorf("prober: %w", err)
	}
	control, err := controlclient.NewDirect(controlclient.Options{
		Persist:              persist.Persist{PrivateNodeKey: p.node},
		GetMachinePrivateKey: func() (key.MachinePrivate, error) { return machine, nil },
		ServerURL:            o.ControlURL,
		AuthKey:              o.AuthKey,
		// Control requires a log ID; the prober sends no logs, so a new
		// one serves.
		Hostinfo:       &tailcfg.Hostinfo{Hostname: o.Hostname, BackendLogID: logID.Public().String()},
		DiscoPublicKey: p.disco.Public(),
		Logf:           logf,
		HealthTracker:  health.NewTracker(p.bus),
		Dialer:         tsdial.NewDialer(p.netMon),
		Bus:            p.bus,
	})
	if err != nil {
		p.bus.Close()
		return nil, fmt.Errorf("prober: %w", err)
	}
	p.control = control
	if _, err := control.TryLogin(ctx, controlclient.LoginEphemeral); err != nil {
		p.Close()
		return nil, fmt.Errorf("prober: log in to %s: %w", o.ControlURL, err)
	}
	pollCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		for pollCtx.Err() == nil {
			if err := control.PollNetMap(pollCtx, p); err != nil && pollCtx.Err() == nil {
				logf("prober: netmap poll: %v", err)
				time.Sleep(time.Second)
			}
		}
	}()
	select {
	case <-p.ready:
	case <-ctx.Done():
		p.Close()
		return nil, fmt.Errorf("prober: no netmap from %s: %w", o.ControlURL, ctx.Err())
	}
	// The prober's home is the DERP map's first region. The relay sends
	// its answers there, once control has been told.
	p.mu.Lock()
	derpMap := p.nm.DERPMap
	p.mu.Unlock()
	if derpMap == nil || len(derpMap.RegionIDs()) == 0 {
		p.Close()
		return nil, errors.New("prober: the control server sent no DERP map")
	}
	p.home = derpMap.RegionIDs()[0]
	if _, err := p.derp(ctx, derpMap, p.home); err != nil {
		p.Close()
		return nil, err
	}
	control.SetNetInfo(&tailcfg.NetInfo{PreferredDERP: p.home})
	if err := control.SendUpdate(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("prober: tell %s its home DERP region: %w", o.ControlURL, err)
	}
	return p, nil
}

// UpdateFullNetmap keeps the latest netmap (controlclient.NetmapUpdater).
func (p *Prober) UpdateFullNetmap(nm *netmap.NetworkMap) {
	p.mu.Lock()
	p.nm = nm
	p.mu.Unlock()
	p.once.Do(func() { close(p.ready) })
}

// Close logs the prober out and stops it.
func (p *Prober) Close() {
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Lock()
	p.closed = true
	for _, c := range p.derps {
		_ = c.Close()
	}
	p.mu.Unlock()
	if p.control != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.control.TryLogout(ctx)
		cancel()
		_ = p.control.Close()
	}
	p.bus.Close()
}

// Peer finds a device in the prober's netmap by its stable ID, the
// device_id containerboot writes into a replica's state Secret.
func (p *Prober) Peer(id tailcfg.StableNodeID) (tailcfg.NodeView, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nm == nil {
		return tailcfg.NodeView{}, false
	}
	for _, n := range p.nm.Peers {
		if n.StableID() == id {
			return n, true
		}
	}
	return tailcfg.NodeView{}, false
}

// Probe asks the relay device for an endpoint and then knocks on addr. It
// returns nil when the relay's challenge comes back from addr within
// timeout.
func (p *Prober) Probe(ctx context.Context, relay tailcfg.NodeView, addr netip.AddrPort, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p.mu.Lock()
	derpMap := p.nm.DERPMap
	p.mu.Unlock()
	alloc, second, err := p.allocate(ctx, relay, derpMap)
	if err != nil {
		return err
	}
	return p.knock(ctx, alloc, second.Public(), addr)
}

// allocate asks the relay, over DERP, for an endpoint shared by the
// prober's disco key and a second one made for this probe.
func (p *Prober) allocate(ctx context.Context, peer tailcfg.NodeView, derpMap *tailcfg.DERPMap) (*disco.AllocateUDPRelayEndpointResponse, key.DiscoPrivate, error) {
	region := peer.HomeDERP()
	if region == 0 {
		region = p.home
	}
	c, err := p.derp(ctx, derpMap, region)
	if err != nil {
		return nil, key.DiscoPrivate{}, err
	}
	second := key.NewDisco()
	gen := generation()
	answer := make(chan *disco.AllocateUDPRelayEndpointResponse, 1)
	p.mu.Lock()
	p.waiters[gen] = waiter{peer: peer.Key(), answer: answer}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiters, gen)
		p.mu.Unlock()
	}()
	req := &disco.AllocateUDPRelayEndpointRequest{ClientDisco: [2]key.DiscoPublic{p.disco.Public(), second.Public()}, Generation: gen}
	msg := sealed(nil, p.disco, peer.DiscoKey(), req.AppendMarshal(nil))
	// The relay may not yet have the prober in its netmap; ask again until
	// it answers or the probe's time is up.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if err := c.Send(peer.Key(), msg); err != nil {
			p.logf("prober: DERP send: %v", err)
		}
		select {
		case resp := <-answer:
			return resp, second, nil
		case <-tick.C:
		case <-ctx.Done():
			return nil, key.DiscoPrivate{}, ErrNoAllocation
		}
	}
}

// knock sends the bind handshake's first message to addr until the relay's
// challenge comes back.
func (p *Prober) knock(ctx context.Context, alloc *disco.AllocateUDPRelayEndpointResponse, remote key.DiscoPublic, addr netip.AddrPort) error {
	network := "udp4"
	if addr.Addr().Is6() {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, nil)
	if err != nil {
		return fmt.Errorf("prober: %w", err)
	}
	defer func() { _ = conn.Close() }()
	// A cancelled ctx ends the read waiting for an answer at once, not at
	// its read deadline up to a second later.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	defer stop()
	gen := generation()
	bind := &disco.BindUDPRelayEndpoint{BindUDPRelayEndpointCommon: disco.BindUDPRelayEndpointCommon{VNI: alloc.VNI, Generation: gen, RemoteKey: remote}}
	pkt := make([]byte, packet.GeneveFixedHeaderLength)
	gh := packet.GeneveHeader{Control: true, Protocol: packet.GeneveProtocolDisco}
	gh.VNI.Set(alloc.VNI)
	if err := gh.Encode(pkt); err != nil {
		return fmt.Errorf("prober: %w", err)
	}
	pkt = sealed(pkt, p.disco, alloc.ServerDisco, bind.AppendMarshal(nil))
	shared := p.disco.Shared(alloc.ServerDisco)
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		if _, err := conn.WriteToUDPAddrPort(pkt, addr); err != nil {
			return fmt.Errorf("prober: send to %s: %w", addr, err)
		}
		deadline := time.Now().Add(time.Second)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = conn.SetReadDeadline(deadline)
		// Checked after the deadline is set: cancelled before, the
		// AfterFunc's deadline may have been overwritten.
		for ctx.Err() == nil {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				break // read deadline: send again
			}
			if from.Addr().Unmap() == addr.Addr().Unmap() && from.Port() == addr.Port() && isChallenge(buf[:n], shared, alloc.VNI, gen) {
				return nil
			}
		}
	}
	return ErrNoAnswer
}

// isChallenge says whether b is the relay server's challenge to our bind.
func isChallenge(b []byte, shared key.DiscoShared, vni, gen uint32) bool {
	var gh packet.GeneveHeader
	if gh.Decode(b) != nil || !gh.Control || gh.VNI.Get() != vni {
		return false
	}
	c, ok := openDisco(b[packet.GeneveFixedHeaderLength:], shared).(*disco.BindUDPRelayEndpointChallenge)
	return ok && c.VNI == vni && c.Generation == gen
}

// openDisco opens a sealed disco message (magic, sender's key, box) with
// the key shared with its sender; nil if it is not one or does not open.
func openDisco(b []byte, shared key.DiscoShared) disco.Message {
	if _, ok := disco.Source(b); !ok {
		return nil
	}
	clear, ok := shared.Open(b[len(disco.Magic)+key.DiscoPublicRawLen:])
	if !ok {
		return nil
	}
	m, err := disco.Parse(clear)
	if err != nil {
		return nil
	}
	return m
}

// sealed appends a disco packet from our key to theirs carrying payload.
func sealed(b []byte, ours key.DiscoPrivate, theirs key.DiscoPublic, payload []byte) []byte {
	b = append(b, disco.Magic...)
	b = ours.Public().AppendTo(b)
	return append(b, ours.Shared(theirs).Seal(payload)...)
}

// generation is a random nonzero handshake or allocation generation.
func generation() uint32 {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:])
		if g := binary.BigEndian.Uint32(b[:]); g != 0 {
			return g
		}
	}
}
