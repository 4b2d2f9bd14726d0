package probe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// starting its receive loop the first time. Probes that start at once
// share one connection attempt: two connections of the prober's key would
// leave the DERP server with a duplicate set, and it drops packets sent to
// a key whose connections have not written yet, so an answer arriving
// before the extra connections' close reached the server was lost.
func (p *Prober) derp(ctx context.Context, derpMap *tailcfg.DERPMap, region int) (*derphttp.Client, error) {
	if c := p.derpClient(region); c != nil {
		return c, nil
	}
	r := derpMap.Regions[region]
	if r == nil {
		return nil, fmt.Errorf("prober: DERP region %d is not in the DERP map", region)
	}
	// The connection outlives the probe that made it: it is not cut short
	// by that probe's context, and a probe waiting on it gives up on its
	// own.
	ch := p.connecting.DoChan(strconv.Itoa(region), func() (any, error) {
		if c := p.derpClient(region); c != nil {
			return c, nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), derpConnectTimeout)
		defer cancel()
		c := derphttp.NewRegionClient(p.node, p.logf, p.netMon, func() *tailcfg.DERPRegion { return r })
		if err := c.Connect(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("prober: connect to DERP region %d: %w", region, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			_ = c.Close()
			return nil, errors.New("prober: closed")
		}
		p.derps[region] = c
		go p.receive(c)
		return c, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*derphttp.Client), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// derpConnectTimeout bounds a connection to a DERP region.
const derpConnectTimeout = 10 * time.Second

// derpClient is the region's connected client, or nil.
func (p *Prober) derpClient(region int) *derphttp.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.derps[region]
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
	resp, _ := openDisco(b, p.disco.Shared(sender)).(*disco.AllocateUDPRelayEndpointResponse)
	return resp
}
