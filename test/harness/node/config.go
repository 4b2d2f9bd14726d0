package node

import (
	"fmt"
	"net/netip"
	"strings"
)

// The node's configuration files, as pure builders: a layout in, file
// contents out. Paths are as the node's processes see them, inside the
// node's mount namespace.

// layout is where a node keeps its files and sockets, and its addresses.
type layout struct {
	// Dir is the node's folder on the host (the test's temporary folder).
	Dir string
	// Bin holds the tools (make tools), cni/ the CNI plugins.
	Bin string
	// Host and Address are the host's and the node's ends of their link;
	// PodCIDR the pods' addresses, on the node's bridge.
	Host, Address netip.Addr
	PodCIDR       netip.Prefix
	// Cgroup is the node's own cgroup, under every hierarchy: the
	// kubelet's cgroupRoot (pods), its node/ child where the node's own
	// processes run.
	Cgroup string
	// Registry is the image registry's host name, and PauseImage the pod
	// sandbox's image there.
	Registry, PauseImage string
}

func (l layout) containerdSocket() string { return l.Dir + "/containerd.sock" }
func (l layout) registryCA() string       { return l.Dir + "/registry-ca.crt" }

// containerdConfig is containerd 2's config (version 3): the CRI plugin
// with runc on cgroupfs (the kubelet's driver), the CNI plugins from the
// tools folder, the test registry trusted by its CA, and the sandbox image
// from it. These machines give root no CAP_SYS_RESOURCE, so no process may
// lower its OOM score below containerd's: the kubelet asks -998 for every
// sandbox and runc fails to set it unless containerd raises it to its own,
// as it does for rootless nodes.
func containerdConfig(l layout) string {
	return fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = %[1]q

[plugins.'io.containerd.internal.v1.opt']
  path = %[7]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[2]q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[3]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[4]q]
    conf_dir = %[5]q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[6]q
        SystemdCgroup = false
`, l.containerdSocket(), l.PauseImage, l.Dir+"/certs.d", l.Bin+"/cni", l.Dir+"/cni", l.Bin+"/runc", l.Dir+"/opt/containerd")
}

// registryHosts is a registry's hosts.toml, for the test registry's own
// name and for Docker Hub's: pulls go to the test registry over HTTPS,
// trusting its CA, and nowhere else. Images named on Docker Hub (the
// tailscale image the function composes) are pushed there by the test:
// there is no Internet here, and nothing may leave the machine.
func registryHosts(l layout) string {
	return fmt.Sprintf(`server = "https://%[1]s"

[host."https://%[1]s"]
  capabilities = ["pull", "resolve"]
  ca = %[2]q
`, l.Registry, l.registryCA())
}

// etcHosts is the node's /etc/hosts: the registry's name is the host's end
// of the link, where the test forwards it.
func etcHosts(l layout) string {
	return fmt.Sprintf("127.0.0.1 localhost\n%s %s\n", l.Host, l.Registry)
}

// cniConfig is the pod network: a bridge on the node with the pod CIDR,
// the node its gateway, pods' addresses not masqueraded (the host routes
// the pod CIDR to the node, so the test reaches each pod at its own
// address and a pod sees the test's), and hostPorts by the portmap plugin.
func cniConfig(l layout) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "peerrelay-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, l.PodCIDR.String())
}

// kubeletConfig is the kubelet's: cgroup v1 allowed (this kernel's only
// hierarchy with controllers), cgroupfs under the node's own cgroup, no
// eviction on the shared disk (as kind), the API server's logs and exec
// open to it (anonymous, AlwaysAllow: the node's firewall lets only the
// host reach its port), volumes resynced every few seconds rather than
// every minute, so a Secret's change reaches a pod within a test's
// patience, its volume plugins' folder in the node's, and host-wide kernel
// settings left alone (startScript shows it its values; a setting it
// would change besides those fails it rather than touch the host).
func kubeletConfig(l layout) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
address: %[3]q
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
resolvConf: %[4]q
clusterDNS: [%[3]q]
clusterDomain: cluster.local
syncFrequency: 5s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard:
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
rotateCertificates: false
protectKernelDefaults: true
volumePluginDir: %[5]q
`, l.Cgroup, l.containerdSocket(), l.Address, l.Dir+"/resolv.conf", l.Dir+"/volume-plugins")
}

// startScript is what starts containerd inside the node's network
// namespace and a mount namespace of its own: a sysfs that shows the
// node's network (the host's cgroup hierarchies moved onto it), a private
// /run, the node's /var/lib, /var/log, /opt, /etc/hosts and
// /etc/resolv.conf from its folder (so nothing the node writes lands on
// the host), the host-wide kernel settings the kubelet wants shown to it as
// it wants them (it would write them to the host otherwise), then
// containerd in the node's cgroup. The kubelet and the rest join these
// namespaces later (inNode).
func startScript(l layout) string {
	d := shellQuote(l.Dir)
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\nmkdir -p %[1]s/cgroupfs %[1]s/var/lib %[1]s/var/log %[1]s/opt %[1]s/sysctl\n", d)
	fmt.Fprintf(&b, "mount --rbind /sys/fs/cgroup %[1]s/cgroupfs\nmount -t sysfs sysfs /sys\nmount --move %[1]s/cgroupfs /sys/fs/cgroup\n", d)
	b.WriteString("mount -t tmpfs tmpfs /run\n")
	for _, m := range [][2]string{{"var/lib", "/var/lib"}, {"var/log", "/var/log"}, {"opt", "/opt"}, {"hosts", "/etc/hosts"}, {"resolv.conf", "/etc/resolv.conf"}} {
		fmt.Fprintf(&b, "mount --bind %s/%s %s\n", d, m[0], m[1])
	}
	for _, k := range kubeletSysctls {
		file := d + "/sysctl/" + strings.ReplaceAll(k.path, "/", ".")
		fmt.Fprintf(&b, "echo %d > %s\nmount --bind %s /proc/sys/%s\n", k.value, file, file, k.path)
	}
	b.WriteString(joinCgroup(l.Cgroup))
	fmt.Fprintf(&b, "exec %s --config %s\n", shellQuote(l.Bin+"/containerd"), shellQuote(l.Dir+"/containerd.toml"))
	return b.String()
}

// kubeletSysctls are the host-wide kernel settings the kubelet sets to its
// values at start (its setupKernelTunables), none of them per namespace.
var kubeletSysctls = []struct {
	path  string
	value int
}{
	{"vm/overcommit_memory", 1}, {"vm/panic_on_oom", 0}, {"kernel/panic", 10},
	{"kernel/panic_on_oops", 1}, {"kernel/keys/root_maxkeys", 1000000}, {"kernel/keys/root_maxbytes", 25000000},
}

// inNode is a script that joins the node's cgroup and runs argv there (the
// kubelet, kube-proxy, CoreDNS: started in the node's namespaces).
func inNode(l layout, argv ...string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	b.WriteString(joinCgroup(l.Cgroup))
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// corefile is CoreDNS's, on the node's address (the pods' nameserver): the
// names the test publishes (Node.Publish), then the cluster's from the API
// server (a headless Service answers with its ready pods). CoreDNS runs its
// plugins in its own order, whatever the Corefile's.
func corefile(l layout) string {
	return fmt.Sprintf(`.:53 {
    bind %[1]s
    errors
    ready %[1]s:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %[2]s/kubelet.kubeconfig test
        pods insecure
        fallthrough
    }
    hosts %[2]s/published {
        reload 1s
        fallthrough
    }
}
`, l.Address, l.Dir)
}

// kubeProxyConfig is kube-proxy's: iptables mode on the node, and no
// conntrack table sizing (a host-wide setting this node must not touch).
func kubeProxyConfig(l layout) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s/kubelet.kubeconfig
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]q
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, l.Dir, Name, l.PodCIDR)
}
