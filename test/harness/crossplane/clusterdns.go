package crossplane

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/cloud"
)

// clusterDNS is the cluster's DNS as the processes of the control plane
// see it (Crossplane core runs outside the pods, in a mount namespace whose
// /etc/resolv.conf names this server): a headless Service's name,
// <service>.<namespace> and <service>.<namespace>.svc.cluster.local,
// answers with its ready pods' addresses, which is how Crossplane reaches a
// function at dns:///<service>.<namespace>:9443; and the names the test
// serves (the package registry) answer with their loopback addresses.
//
// Why not the node's CoreDNS: core starts before any node (it installs the
// packages whose pods the node then runs), the control-plane benchmarks'
// hollow node runs no CoreDNS at all, and core on a cluster is a pod the
// kubelet gives the cluster DNS, while here it is a host process outside
// the node's network. The pods themselves resolve through CoreDNS.
type clusterDNS struct {
	*cloud.DNS
	// resolvConf names the server; bind-mounted over /etc/resolv.conf.
	resolvConf string
}

// startClusterDNS serves on port 53 of a loopback address of its own and
// follows Services and pods until the test ends.
func startClusterDNS(t testing.TB, admin client.Client, dir string) *clusterDNS {
	t.Helper()
	ip, _, _ := net.SplitHostPort(harness.LoopbackAddress())
	d := &clusterDNS{DNS: cloud.StartDNSOn(t, net.JoinHostPort(ip, "53")), resolvConf: filepath.Join(dir, "resolv.conf")}
	if err := os.WriteFile(d.resolvConf, []byte("nameserver "+ip+"\noptions timeout:1 attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			d.sync(ctx, admin)
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// sync sets every headless Service's records from its ready pods.
func (d *clusterDNS) sync(ctx context.Context, admin client.Client) {
	svcs := &corev1.ServiceList{}
	if err := admin.List(ctx, svcs); err != nil {
		return
	}
	for _, s := range svcs.Items {
		if s.Spec.ClusterIP != corev1.ClusterIPNone || len(s.Spec.Selector) == 0 {
			continue
		}
		pods := &corev1.PodList{}
		if err := admin.List(ctx, pods, client.InNamespace(s.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(s.Spec.Selector)}); err != nil {
			continue
		}
		var ips []string
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil && harness.PodReady(&p) {
				ips = append(ips, p.Status.PodIP)
			}
		}
		d.Set(s.Name+"."+s.Namespace, ips...)
		d.Set(s.Name+"."+s.Namespace+".svc.cluster.local", ips...)
	}
}

// inMountNamespace wraps a command so that it runs in a private mount
// namespace seeing resolvConf as /etc/resolv.conf: the host's stays as it
// is. The command keeps the wrapper's PID (each step execs the next).
func inMountNamespace(resolvConf, bin string, args []string) (string, []string) {
	script := `mount --bind "$0" /etc/resolv.conf && exec "$@"`
	return "unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c", script, resolvConf, bin}, args...)
}
