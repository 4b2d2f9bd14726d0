package kubelet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/peerrelay/peerrelay/test/harness"
)

// portMap forwards UDP ports of the node's address to pods, as the CNI
// portmap plugin does for a container's hostPort and kube-proxy for a
// NodePort Service with externalTrafficPolicy Local (to a ready pod on this
// node). It forwards in user space: each peer gets a socket of its own
// toward the pod, so replies find their way back, but the pod sees the
// node's address as the peer's (as behind a NAT).
type portMap struct {
	node netip.Addr

	mu  sync.Mutex
	fwd map[uint16]*udpForward
}

// sync makes the forwarded ports exactly want (node port → pod address).
func (pm *portMap) sync(want map[uint16]netip.AddrPort) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.fwd == nil {
		pm.fwd = map[uint16]*udpForward{}
	}
	for port, f := range pm.fwd {
		if to, ok := want[port]; !ok || to != f.to {
			f.close()
			delete(pm.fwd, port)
		}
	}
	for port, to := range want {
		if _, ok := pm.fwd[port]; ok {
			continue
		}
		if f, err := forwardUDP(netip.AddrPortFrom(pm.node, port), to); err == nil {
			pm.fwd[port] = f
		}
	}
}

func (pm *portMap) close() { pm.sync(nil) }

// mappedPorts is what the node forwards now: every running pod's UDP
// hostPorts, and every UDP node port of a NodePort Service with
// externalTrafficPolicy Local to a ready pod it selects here.
func (n *Node) mappedPorts(ctx context.Context, pods []corev1.Pod) map[uint16]netip.AddrPort {
	want := map[uint16]netip.AddrPort{}
	n.mu.Lock()
	ips := make(map[string]netip.Addr, len(n.pods))
	for _, r := range n.pods {
		if r.ip.IsValid() {
			ips[r.ns+"/"+r.name] = r.ip
		}
	}
	n.mu.Unlock()
	for _, p := range pods {
		ip, ok := ips[p.Namespace+"/"+p.Name]
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.HostPort > 0 && cp.Protocol == corev1.ProtocolUDP {
					want[uint16(cp.HostPort)] = netip.AddrPortFrom(ip, uint16(cp.ContainerPort))
				}
			}
		}
	}
	svcs := &corev1.ServiceList{}
	if err := n.admin.List(ctx, svcs); err != nil {
		return want
	}
	for _, s := range svcs.Items {
		if s.Spec.Type != corev1.ServiceTypeNodePort || s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || len(s.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		for _, p := range pods {
			ip, ok := ips[p.Namespace+"/"+p.Name]
			if !ok || p.Namespace != s.Namespace || !sel.Matches(labels.Set(p.Labels)) || !harness.PodReady(&p) {
				continue
			}
			for _, sp := range s.Spec.Ports {
				if sp.Protocol == corev1.ProtocolUDP && sp.NodePort > 0 {
					want[uint16(sp.NodePort)] = netip.AddrPortFrom(ip, uint16(sp.TargetPort.IntValue()))
				}
			}
		}
	}
	return want
}

// udpForward is one forwarded port.
type udpForward struct {
	to netip.AddrPort
	in *net.UDPConn

	mu    sync.Mutex
	peers map[netip.AddrPort]*net.UDPConn
}

// peerIdle is how long a peer's socket toward the pod lives unused.
const peerIdle = 2 * time.Minute

func forwardUDP(listen, to netip.AddrPort) (*udpForward, error) {
	in, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(listen))
	if err != nil {
		return nil, err
	}
	f := &udpForward{to: to, in: in, peers: map[netip.AddrPort]*net.UDPConn{}}
	go f.serve()
	return f, nil
}

func (f *udpForward) serve() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := f.in.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		out, err := f.peer(from)
		if err != nil {
			continue
		}
		_ = out.SetReadDeadline(time.Now().Add(peerIdle))
		_, _ = out.Write(buf[:n])
	}
}

// peer is from's socket toward the pod; what the pod sends back on it goes
// to from.
func (f *udpForward) peer(from netip.AddrPort) (*net.UDPConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.peers[from]; ok {
		return c, nil
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(f.to))
	if err != nil {
		return nil, err
	}
	f.peers[from] = c
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				break // closed, or idle past its deadline
			}
			_, _ = f.in.WriteToUDPAddrPort(buf[:n], from)
		}
		f.mu.Lock()
		if f.peers[from] == c {
			delete(f.peers, from)
		}
		f.mu.Unlock()
		_ = c.Close()
	}()
	return c, nil
}

func (f *udpForward) close() {
	_ = f.in.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.peers {
		_ = c.Close()
	}
}
