package cloud

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// UDPLoadBalancer stands in for a cloud's network load balancer in front of
// one relay replica: datagrams sent to its front address go to the backend,
// from a socket of its own per client, and the backend's answers go back to
// that client from the front address. Drop plays a path that loses every
// packet (an Elastic IP in the wrong zone, a security group that says no).
type UDPLoadBalancer struct {
	front   *net.UDPConn
	backend func() (netip.AddrPort, bool)
	drop    atomic.Bool

	mu      sync.Mutex
	clients map[netip.AddrPort]*net.UDPConn
	done    chan struct{}
}

// StartUDPLoadBalancer listens on front (an address of this host) and
// forwards to whatever backend returns at each packet (the pod's address,
// once it has one). It stops when the test ends.
func StartUDPLoadBalancer(t testing.TB, front netip.AddrPort, backend func() (netip.AddrPort, bool)) *UDPLoadBalancer {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(front))
	if err != nil {
		t.Fatal(err)
	}
	lb := &UDPLoadBalancer{front: c, backend: backend, clients: map[netip.AddrPort]*net.UDPConn{}, done: make(chan struct{})}
	go lb.serve()
	t.Cleanup(lb.close)
	return lb
}

// Drop makes the load balancer lose every packet (true) or forward again.
func (lb *UDPLoadBalancer) Drop(drop bool) { lb.drop.Store(drop) }

func (lb *UDPLoadBalancer) serve() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := lb.front.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if lb.drop.Load() {
			continue
		}
		to, ok := lb.backend()
		if !ok {
			continue
		}
		up := lb.upstream(from)
		if up == nil {
			continue
		}
		_, _ = up.WriteToUDPAddrPort(buf[:n], to)
	}
}

// upstream returns the client's socket towards the backend, and starts
// carrying the backend's answers back to the client.
func (lb *UDPLoadBalancer) upstream(client netip.AddrPort) *net.UDPConn {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if c, ok := lb.clients[client]; ok {
		return c
	}
	select {
	case <-lb.done:
		return nil
	default:
	}
	c, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil
	}
	lb.clients[client] = c
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if lb.drop.Load() {
				continue
			}
			_ = lb.front.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = lb.front.WriteToUDPAddrPort(buf[:n], client)
		}
	}()
	return c
}

func (lb *UDPLoadBalancer) close() {
	lb.mu.Lock()
	close(lb.done)
	for _, c := range lb.clients {
		_ = c.Close()
	}
	lb.mu.Unlock()
	_ = lb.front.Close()
}
