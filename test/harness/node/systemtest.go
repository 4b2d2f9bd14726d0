package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What the system tests (test/crossplane) ask of the node their pods run on.

// Address is the node's InternalIP (it has no ExternalIP): where its
// hostPorts and NodePorts are reached.
func (n *Node) Address() netip.Addr { return n.addr }

// ServicesIP is a host address on its end of the node's link: where the
// test serves what pods talk to (Tailscale's control server, APIs).
func (n *Node) ServicesIP() net.IP { return net.ParseIP(n.services.String()) }

// HostAddress gives the host addr as well, on its end of the node's link:
// an address pods reach through their default route, where the test
// serves what stands for a cloud's (a load balancer's front address). It
// goes when the test ends.
func (n *Node) HostAddress(t testing.TB, addr netip.Addr) {
	t.Helper()
	if err := ip("addr", "add", addr.String()+"/32", "dev", n.hostLink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ip("addr", "del", addr.String()+"/32", "dev", n.hostLink) })
}

// TestHost makes a host of the test's own beside the node: a network
// namespace linked to the node, which routes it to the pods, their
// NodePorts and the host. It is removed when the test ends. It returns the
// namespace's name, for ip netns exec, and its address.
func (n *Node) TestHost(t testing.TB) (string, netip.Addr) {
	t.Helper()
	n.mu.Lock()
	i := n.testHosts
	n.testHosts++
	n.mu.Unlock()
	if 4*i+3 > 255 {
		t.Fatalf("the node has room for 64 test hosts (a /30 each in %s)", n.testHostCIDR)
	}
	base := n.testHostCIDR.Addr().As4()
	base[3] = byte(4 * i)
	gw, addr := netip.AddrFrom4(base).Next(), netip.AddrFrom4(base).Next().Next()
	ns := fmt.Sprintf("%st%d", n.netns, i)
	nodeEnd, hostEnd := ns+"n", ns+"h"
	t.Cleanup(func() { _ = ip("netns", "delete", ns) })
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", nodeEnd, "netns", n.netns, "type", "veth", "peer", "name", hostEnd, "netns", ns},
		{"-n", n.netns, "addr", "add", gw.String() + "/30", "dev", nodeEnd},
		{"-n", n.netns, "link", "set", nodeEnd, "up"},
		{"-n", ns, "link", "set", hostEnd, "name", "eth0"},
		{"-n", ns, "addr", "add", addr.String() + "/30", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", "default", "via", gw.String()},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	return ns, addr
}

// Publish makes host resolve to ip in the node's cluster DNS, and pods'
// tailscale image trust ca: the image (containerboot, tailscaled and
// tailscale as make tools builds them) is pushed to the registry under the
// name the function composes, with ca in its bundle, since the control
// server's CA is made for each run.
func (n *Node) Publish(host string, ip net.IP, ca []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(n.l.Dir, "published"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = fmt.Fprintf(f, "%s %s\n", ip, host)
		_ = f.Close()
	}
	if err != nil {
		n.t.Fatalf("publishing %s: %v", host, err)
	}
	if len(ca) > 0 {
		n.trusted = append(n.trusted, ca...)
		pushTailscale(n.t, n.reg, n.l.Bin, n.trusted)
	}
}

// Hold takes the pods match selects off the node until release is called:
// the node is cordoned and they are deleted, so that their controllers'
// new pods wait unscheduled (every new pod waits meanwhile: the node is
// the cluster's only one). Use it to take a package's pod down (a provider
// crashed or lagging). It fails the test if they are not gone in a minute.
func (n *Node) Hold(match func(*corev1.Pod) bool) (release func()) {
	ctx := context.Background()
	n.cordon(ctx, true)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		pods, err := n.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		held := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if err != nil || !match(p) || p.Spec.NodeName != Name {
				continue
			}
			held++
			if p.DeletionTimestamp == nil {
				_ = n.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		}
		if err == nil && held == 0 {
			break
		}
		if time.Now().After(deadline) {
			n.t.Errorf("held pods still on the node after a minute (%d, %v)", held, err)
			break
		}
	}
	return func() { n.cordon(ctx, false) }
}

func (n *Node) cordon(ctx context.Context, on bool) {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := n.kube.CoreV1().Nodes().Patch(ctx, Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		n.t.Errorf("cordon %s %t: %v", Name, on, err)
	}
}

// Logs returns what a pod's container printed, through the API server
// and the kubelet: the previous container's first, if it restarted.
func (n *Node) Logs(ns, name string) string {
	ctx := context.Background()
	p, err := n.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(p.Spec.Containers) == 0 {
		return ""
	}
	var out strings.Builder
	if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > 0 {
		b, _ := n.kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Previous: true}).DoRaw(ctx)
		out.Write(b)
	}
	b, _ := n.kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	out.Write(b)
	return out.String()
}

// LogsByPrefix returns Logs of the pods in ns whose names start with
// prefix, by pod name: a Deployment's pods.
func (n *Node) LogsByPrefix(ns, prefix string) map[string]string {
	out := map[string]string{}
	pods, err := n.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return out
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out[p.Name] = n.Logs(ns, p.Name)
		}
	}
	return out
}

// Socket is the tailscaled LocalAPI socket of a running pod
// (containerboot's default, /tmp/tailscaled.sock, in the emptyDir at
// /tmp), or "". The kubelet's path to it is longer than a socket's address
// may be, so the socket is reached through a short link to it.
func (n *Node) Socket(ns, name string) string {
	p, err := n.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || len(p.Spec.Containers) == 0 || p.Status.Phase != corev1.PodRunning {
		return ""
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.MountPath != "/tmp" {
			continue
		}
		target := filepath.Join("/proc", strconv.Itoa(n.containerd.Pid()), "root", "var/lib/kubelet/pods", string(p.UID),
			"volumes/kubernetes.io~empty-dir", m.Name, "tailscaled.sock")
		if _, err := os.Stat(target); err != nil {
			return ""
		}
		link := filepath.Join(n.sockets, string(p.UID)[:8]+".sock")
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return ""
		}
		return link
	}
	return ""
}
