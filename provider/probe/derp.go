package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go4.org/mem"
	"tailscale.com/derp"
	"tailscale.com/derp/derphttp"
	"tailscale.com/disco"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
)

// The prober's DERP side: one client per region, shared by the probes
// that use it, and the allocation answers it receives, handed to the
// probe that asked.

// derp returns the prober's client for a DERP region, connecting it and
// starting its receive loop the first time.
func (p *Prober) derp(ctx context.Context, derpMap *tailcfg.DERPMap, region int) (*derphttp.Client, error) {
	p.mu.Lock()
	c, ok := p.derps[region]
	p.mu.Unlock()
	if ok {
		return c, nil
	}
	r := derpMap.Regions[region]
	if r == nil {
		return nil, fmt.Errorf("prober: DERP region %d is not in the DERP map", region)
	}
	c = derphttp.NewRegionClient(p.node, p.logf, p.netMon, func() *tailcfg.DERPRegion { return r })
	if err := c.Connect(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("prober: connect to DERP region %d: %w", region, err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.Close()
		return nil, errors.New("prober: closed")
	}
	if won, ok := p.derps[region]; ok {
		// A probe started at the same time connected first: share its
		// client. A second one would be left out of p.derps, so never
		// closed, not even by Close, and the DERP server would hold two
		// connections of the prober's key, sending to the last that wrote.
		p.mu.Unlock()
		_ = c.Close()
		return won, nil
	}
	p.derps[region] = c
	p.mu.Unlock()
	go p.receive(c)
	return c, nil
}

// receive hands allocation answers arriving over DERP to their probes.
func (p *Prober) receive(c *derphttp.Client) {
	for {
		m, err := c.Recv()
		if err != nil {
			if errors.Is(err, derphttp.ErrClientClosed) {
				return
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		pkt, ok := m.(derp.ReceivedPacket)
		if !ok {
			continue
		}
		p.deliver(pkt.Source, pkt.Data)
	}
}

// deliver hands an allocation answer to the probe waiting for its
// generation, if that probe asked the peer it came from: any other peer in
// the netmap can seal an answer to the prober's disco key.
func (p *Prober) deliver(from key.NodePublic, b []byte) {
	resp := p.openAllocation(from, b)
	if resp == nil {
		return
	}
	p.mu.Lock()
	w, ok := p.waiters[resp.Generation]
	p.mu.Unlock()
	if ok && w.peer == from {
		select {
		case w.answer <- resp:
		default:
		}
	}
}

// openAllocation opens an allocation answer sent by a peer in the netmap
// under the disco key the netmap gives it.
func (p *Prober) openAllocation(from key.NodePublic, b []byte) *disco.AllocateUDPRelayEndpointResponse {
	raw, ok := disco.Source(b)
	if !ok {
		return nil
	}
	sender := key.DiscoPublicFromRaw32(mem.B(raw))
	p.mu.Lock()
	var known bool
	if p.nm != nil {
		for _, n := range p.nm.Peers {
			if n.Key() == from && n.DiscoKey() == sender {
				known = true
				break
			}
		}
	}
	p.mu.Unlock()
	if !known {
		return nil
	}
	clear, ok := p.disco.Shared(sender).Open(b[len(disco.Magic)+key.DiscoPublicRawLen:])
	if !ok {
		return nil
	}
	m, err := disco.Parse(clear)
	if err != nil {
		return nil
	}
	resp, _ := m.(*disco.AllocateUDPRelayEndpointResponse)
	return resp
}
