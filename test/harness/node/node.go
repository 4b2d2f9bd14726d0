// Package node runs a real Kubernetes node for the tests: the kubelet and
// kube-proxy (iptables mode) at the API server's version, containerd 2 with
// runc (seccomp built in), the CNI bridge, host-local, loopback and portmap
// plugins, and CoreDNS as the cluster DNS, each built from its module by
// make tools, with Kubernetes' own pause program as the pod sandbox. Pods
// run in real containers from images in the test registry.
//
// The node lives in a network namespace and a mount namespace of its own,
// and its processes and containers in a cgroup of its own under every
// hierarchy, so that Stop removes everything it made: killing the cgroup
// ends every process (containerd's shims included, which leave its process
// group), the mount namespace takes the node's mounts with it, and deleting
// the network namespace takes its interfaces and its iptables rules. The
// host reaches pods at their own addresses and ClusterIPs (routes through
// the node); the node reaches the API server and the registry through the
// host's end of their link, where the test forwards them from loopback, and
// its pods reach the API server at the kubernetes Service, as on a cluster
// (the API server runs with harness.APIServerOptions.RealNode).
//
// The kubelet, kube-proxy and CoreDNS run as processes in the node, not as
// pods: a node's system daemons, started before any pod can be.
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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/test/harness"
)

// Name is the node's name.
const Name = "peerrelay-node"

// apiServerPort is where the host's end of the link forwards the API
// server.
const apiServerPort = 6443

// Registry is the image registry pods pull from: its host name, where it
// listens (on the host), and its CA.
type Registry struct {
	Host, Addr string
	CA         []byte
}

// Node is a running node.
type Node struct {
	// addr is the node's InternalIP, its end of the link to the host;
	// host is the host's end, where the node reaches the API server and
	// the registry; services a second host address on it, where pods
	// reach the test's servers (ServicesIP).
	addr, host, services netip.Addr
	// PodCIDR is where pods get their addresses.
	PodCIDR netip.Prefix
	// testHostCIDR is where TestHost's namespaces get theirs, a /30 each.
	testHostCIDR netip.Prefix

	t       testing.TB
	kube    kubernetes.Interface
	reg     Registry
	sockets string // short links to pods' sockets (Socket)

	l          layout
	slot       *slot
	netns      string
	hostLink   string
	containerd *harness.Process
	kubelet    *harness.Process
	kubeProxy  *harness.Process
	coreDNS    *harness.Process
	mu         sync.Mutex // the published names, trusted CAs, test hosts
	trusted    []byte
	testHosts  int
	stops      []func()
	stopOnce   sync.Once
}

// Start starts a node registered with the API server admin reaches, pulling
// images from reg, and waits for it to be Ready. The pause image is pushed
// to reg first. Everything is removed when the test ends, or by Stop.
func Start(t testing.TB, admin *rest.Config, reg Registry) *Node {
	t.Helper()
	harness.Need(t, os.Geteuid() == 0, "a node makes network and mount namespaces and cgroups: run the tests as root")
	bin := harness.ToolsDir(t)
	for _, tool := range []string{"kubelet", "kube-proxy", "coredns", "containerd", "containerd-shim-runc-v2", "runc", "pause", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"} {
		harness.Tool(t, tool)
	}
	sl, err := claimSlot()
	if err != nil {
		t.Fatal(err)
	}
	third := sl.n%slots + 20
	n := &Node{
		slot:     sl,
		host:     netip.MustParseAddr(fmt.Sprintf("10.78.%d.1", third)),
		addr:     netip.MustParseAddr(fmt.Sprintf("10.78.%d.2", third)),
		services: netip.MustParseAddr(fmt.Sprintf("10.78.%d.3", third)),
		PodCIDR:  netip.MustParsePrefix(fmt.Sprintf("10.79.%d.0/24", third)),
		netns:    sl.netns(),
		t:        t, reg: reg, kube: kubernetes.NewForConfigOrDie(admin),
		testHostCIDR: netip.MustParsePrefix(fmt.Sprintf("10.80.%d.0/24", third)),
	}
	n.hostLink = n.netns + "h"
	n.l = layout{
		Dir: t.TempDir(), Bin: bin, Host: n.host, Address: n.addr, PodCIDR: n.PodCIDR,
		Cgroup:   sl.cgroup(),
		Registry: reg.Host, PauseImage: reg.Host + "/pause:" + pauseTag,
	}
	// Registered after TempDir, so it runs before the folder is removed.
	t.Cleanup(n.Stop)
	pushPause(t, reg, n.l.PauseImage, filepath.Join(bin, "pause"))
	if n.sockets, err = os.MkdirTemp("", "prsock"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(n.sockets) })

	if err := n.link(); err != nil {
		t.Fatal(err)
	}
	apiServer, err := harness.HostPort(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	n.stops = append(n.stops, harness.ProxyTCP(t, net.JoinHostPort(n.host.String(), strconv.Itoa(apiServerPort)), apiServer))
	n.stops = append(n.stops, harness.ProxyTCP(t, net.JoinHostPort(n.host.String(), "443"), reg.Addr))
	if err := makeCgroups(n.l.Cgroup); err != nil {
		t.Fatal(err)
	}
	n.writeFiles(t, admin, reg.CA)

	// nsenter, and unshare without --fork, exec what they run, and the
	// script ends in exec: the process started is containerd itself, whose
	// namespaces the rest of the node joins (startInNode).
	n.containerd = harness.StartProcess(t, "containerd", "nsenter",
		[]string{"--net=/run/netns/" + n.netns, "--", "unshare", "--mount", "--propagation", "private", "sh", "-c", startScript(n.l)},
		[]string{"PATH=" + bin + ":" + os.Getenv("PATH")})
	harness.Eventually(t, 30*time.Second, "containerd's socket", func(context.Context) error {
		if n.containerd.Exited() {
			return fmt.Errorf("containerd exited:\n%s", harness.Tail(n.containerd.Log.String(), 4<<10))
		}
		_, err := os.Stat(n.l.containerdSocket())
		return err
	})
	n.kubelet = n.startInNode(t, "kubelet", filepath.Join(bin, "kubelet"), "--config="+n.l.Dir+"/kubelet.yaml",
		"--kubeconfig="+n.l.Dir+"/kubelet.kubeconfig", "--hostname-override="+Name, "--node-ip="+n.addr.String(),
		"--cert-dir="+n.l.Dir+"/pki", "--v=1")
	n.kubeProxy = n.startInNode(t, "kube-proxy", filepath.Join(bin, "kube-proxy"), "--config="+n.l.Dir+"/kube-proxy.yaml")
	n.coreDNS = n.startInNode(t, "coredns", filepath.Join(bin, "coredns"), "-conf", n.l.Dir+"/Corefile")

	kube := n.kube
	n.publishAPIServer(t, kube)
	harness.Eventually(t, 90*time.Second, "the node Ready", func(ctx context.Context) error {
		for _, p := range []*harness.Process{n.kubelet, n.kubeProxy, n.coreDNS} {
			if p.Exited() {
				return fmt.Errorf("%s exited:\n%s", p.Name, harness.Tail(p.Log.String(), 4<<10))
			}
		}
		node, err := kube.CoreV1().Nodes().Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node conditions: %v", node.Status.Conditions)
	})
	return n
}

// startInNode starts argv in the node's namespaces and cgroup.
func (n *Node) startInNode(t testing.TB, name string, argv ...string) *harness.Process {
	t.Helper()
	return harness.StartProcess(t, name, "nsenter",
		[]string{"--target", strconv.Itoa(n.containerd.Pid()), "--mount", "--net", "--", "sh", "-c", inNode(n.l, argv...)}, nil)
}

// publishAPIServer points the kubernetes Service at the host's end of the
// link, where the test forwards the API server: pods reach it at
// 10.0.0.1:443 through kube-proxy, as on a cluster.
func (n *Node) publishAPIServer(t testing.TB, kube kubernetes.Interface) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{n.host.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](apiServerPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := kube.DiscoveryV1().EndpointSlices("default").Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("publishing the API server to the node's pods: %v", err)
	}
}

// writeFiles writes the node's configuration into its folder.
func (n *Node) writeFiles(t testing.TB, admin *rest.Config, registryCA []byte) {
	t.Helper()
	// The kubelet reaches the API server through the host's end of the
	// link; the server's certificate names kubernetes.default.svc.
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + net.JoinHostPort(n.host.String(), strconv.Itoa(apiServerPort))
	cfg.ServerName = "kubernetes.default.svc"
	if _, err := harness.WriteKubeconfigFile(cfg, n.l.Dir, "kubelet"); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"containerd.toml":                         containerdConfig(n.l),
		"certs.d/" + n.l.Registry + "/hosts.toml": registryHosts(n.l),
		"certs.d/docker.io/hosts.toml":            registryHosts(n.l),
		"registry-ca.crt":                         string(registryCA),
		"hosts":                                   etcHosts(n.l),
		"resolv.conf":                             "nameserver " + n.addr.String() + "\n", // CoreDNS
		"cni/10-peerrelay-node.conflist":          cniConfig(n.l),
		"kubelet.yaml":                            kubeletConfig(n.l),
		"kube-proxy.yaml":                         kubeProxyConfig(n.l),
		"Corefile":                                corefile(n.l),
		"published":                               "",
	}
	for name, content := range files {
		path := filepath.Join(n.l.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Stop stops the node and removes what it made: its processes and
// containers, its cgroups, its namespaces and link, its forwarders; and
// fails the test if anything is left (Leftovers).
func (n *Node) Stop() {
	n.stopOnce.Do(func() {
		for _, p := range []*harness.Process{n.kubelet, n.kubeProxy, n.coreDNS} {
			if p != nil {
				p.Stop()
			}
		}
		killCgroup(n.l.Cgroup)
		if n.containerd != nil {
			n.containerd.Stop()
		}
		removeCgroups(n.l.Cgroup)
		n.unlink()
		for _, stop := range n.stops {
			stop()
		}
		if left := n.Leftovers(); len(left) > 0 {
			n.t.Errorf("the node left behind:\n%s", strings.Join(left, "\n"))
		}
		n.slot.release()
	})
}

// cpu measures, over d, the share of one core the node's own processes
// (kubelet, containerd and its shims, kube-proxy, CoreDNS) and the whole node use.
func (n *Node) cpu(d time.Duration) string {
	own, all := cpuUsed(n.l.Cgroup, "node"), cpuUsed(n.l.Cgroup, "")
	time.Sleep(d)
	own, all = cpuUsed(n.l.Cgroup, "node")-own, cpuUsed(n.l.Cgroup, "")-all
	return fmt.Sprintf("kubelet, containerd, kube-proxy and CoreDNS %.1f%% of a core, with the pods %.1f%%", 100*own.Seconds()/d.Seconds(), 100*all.Seconds()/d.Seconds())
}
