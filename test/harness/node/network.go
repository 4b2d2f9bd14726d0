package node

import (
	"fmt"
	"os/exec"

	"github.com/peerrelay/peerrelay/test/harness"
)

// link makes the node's network namespace and its link to the host: a veth
// pair, the host's end Host/24 (and ServicesIP), the node's Address/24
// with its default route through the host, forwarding on in the node (it
// routes its pods and the test's hosts), routes on the host to the pods
// and the test's hosts through the node, and the kubelet's port open to
// the host alone (it serves logs and exec to anyone it lets in).
func (n *Node) link() error {
	nodeLink := n.netns + "n"
	for _, args := range [][]string{
		{"netns", "add", n.netns},
		{"link", "add", n.hostLink, "type", "veth", "peer", "name", nodeLink},
		{"link", "set", nodeLink, "netns", n.netns},
		{"addr", "add", n.host.String() + "/24", "dev", n.hostLink},
		{"addr", "add", n.services.String() + "/32", "dev", n.hostLink},
		{"link", "set", n.hostLink, "up"},
		{"-n", n.netns, "link", "set", nodeLink, "name", "eth0"},
		{"-n", n.netns, "addr", "add", n.addr.String() + "/24", "dev", "eth0"},
		{"-n", n.netns, "link", "set", "eth0", "up"},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", n.netns, "route", "add", "default", "via", n.host.String()},
		{"route", "add", n.PodCIDR.String(), "via", n.addr.String()},
		{"route", "add", n.testHostCIDR.String(), "via", n.addr.String()},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	for _, cmd := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"iptables", "-A", "INPUT", "-p", "tcp", "--dport", "10250", "!", "-s", n.host.String(), "-j", "DROP"},
	} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", n.netns}, cmd...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("in the node: %v: %v: %s", cmd, err, out)
		}
	}
	return nil
}

// unlink deletes the node's network namespace: its interfaces and rules go
// with it. The host's end of the veth and its routes are deleted too, at
// once: another node's mount namespace may still hold this namespace open.
func (n *Node) unlink() {
	_ = ip("netns", "delete", n.netns)
	_ = ip("link", "delete", n.hostLink)
}

func ip(args ...string) error { return harness.IP(args...) }
