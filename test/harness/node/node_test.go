package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/peerrelay/peerrelay/test/harness"
	"github.com/peerrelay/peerrelay/test/harness/crossplane"
)

// TestNode runs a pod the way a relay pod is run (non-root, read-only root,
// no capabilities, RuntimeDefault seccomp, a readiness probe, a hostPort)
// from the test registry on a real node, and checks that the runtime
// enforced what the pod asked, that the host reaches the pod at its own
// address and through its hostPort, that the API server reaches the
// kubelet for its logs, and that Stop leaves nothing behind.
func TestNode(t *testing.T) {
	if testing.Short() {
		t.Skip("a real node")
	}
	hostBefore := hostState()
	api := harness.StartAPIServerWith(t, harness.APIServerOptions{RealNode: true})
	// kube-proxy follows EndpointSlices, which the controller manager keeps.
	kc := harness.WriteKubeconfig(t, api.Config, t.TempDir(), "admin")
	harness.StartProcess(t, "kube-controller-manager", harness.Tool(t, "kube-controller-manager"), []string{
		"--kubeconfig=" + kc, "--controllers=endpointslice", "--leader-elect=false", "--secure-port=0",
	}, nil)
	reg := crossplane.StartRegistry(t, "xpkg.crossplane.io")
	image := reg.PushProgram(t, "web", "v1", "github.com/peerrelay/peerrelay/test/harness/tenantmetrics")
	n := Start(t, api.Config, Registry{Host: reg.Host, Addr: reg.Addr, CA: reg.CA})
	kube := kubernetes.NewForConfigOrDie(api.Config)
	ctx := t.Context()

	t.Logf("node at rest: %s", n.cpu(5*time.Second))

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:                      Name,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name: "web", Image: image,
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9002, HostPort: 19002, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("metrics")}},
					PeriodSeconds: 1,
				},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr.To(true),
					ReadOnlyRootFilesystem:   ptr.To(true),
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var podIP netip.Addr
	harness.Eventually(t, 2*time.Minute, "the pod Ready", func(ctx context.Context) error {
		p, err := kube.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !harness.PodReady(p) {
			return fmt.Errorf("pod %s: %v %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		podIP, err = netip.ParseAddr(p.Status.PodIP)
		return err
	})
	if !n.PodCIDR.Contains(podIP) {
		t.Errorf("pod IP %s is not in the node's pod CIDR %s", podIP, n.PodCIDR)
	}
	t.Logf("node with one pod: %s", n.cpu(5*time.Second))

	t.Run("Runtime", func(t *testing.T) {
		status := containerStatus(t, n, "/program")
		for field, want := range map[string]string{
			"Uid":        "65532",
			"Seccomp":    "2", // a filter: containerd's RuntimeDefault profile
			"NoNewPrivs": "1",
			"CapEff":     "0000000000000000",
		} {
			if got := strings.Fields(status[field]); len(got) == 0 || got[0] != want {
				t.Errorf("the container's %s is %q, want %s", field, status[field], want)
			}
		}
	})

	t.Run("Network", func(t *testing.T) {
		for _, url := range []string{
			"http://" + podIP.String() + ":9002/direct",     // the pod's own address
			"http://" + n.addr.String() + ":19002/hostport", // portmap's DNAT on the node
		} {
			if body, err := get(ctx, http.DefaultClient, url); err != nil || !strings.Contains(body, "forwarded_packets_total") {
				t.Errorf("GET %s: %q, %v", url, body, err)
			}
		}
		// Through the API server, which reaches the kubelet at the node's
		// address: the pod saw the host's own address on both, un-NATed.
		harness.Eventually(t, 30*time.Second, "the pod's log through the kubelet", func(ctx context.Context) error {
			b, err := kube.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			for _, want := range []string{"GET /direct from " + n.host.String(), "GET /hostport from " + n.host.String()} {
				if !strings.Contains(string(b), want) {
					return fmt.Errorf("no %q in the log:\n%s", want, b)
				}
			}
			return nil
		})
	})

	t.Run("Services", func(t *testing.T) {
		svc, err := kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeNodePort, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dns := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(n.addr.String(), "53"))
		}}
		harness.Eventually(t, 30*time.Second, "CoreDNS answers the Service's name with its ClusterIP", func(ctx context.Context) error {
			addrs, err := dns.LookupHost(ctx, "web.default.svc.cluster.local")
			if err != nil || len(addrs) != 1 || addrs[0] != svc.Spec.ClusterIP {
				return fmt.Errorf("%v, %v; want %s", addrs, err, svc.Spec.ClusterIP)
			}
			return nil
		})
		// ClusterIPs are the node's alone: reached from a host beside it.
		beside, _ := n.TestHost(t)
		fromBeside := &http.Client{Transport: &http.Transport{DialContext: dialIn(beside)}}
		nodePort := fmt.Sprintf("http://%s:%d/nodeport", n.addr, svc.Spec.Ports[0].NodePort)
		harness.Eventually(t, 30*time.Second, "kube-proxy's ClusterIP and NodePort", func(ctx context.Context) error {
			for url, c := range map[string]*http.Client{"http://" + svc.Spec.ClusterIP + "/clusterip": fromBeside, nodePort: http.DefaultClient} {
				if body, err := get(ctx, c, url); err != nil || !strings.Contains(body, "forwarded_packets_total") {
					return fmt.Errorf("GET %s: %q, %v", url, body, err)
				}
			}
			return nil
		})
		// externalTrafficPolicy Local: the pod sees the client's address.
		harness.Eventually(t, 30*time.Second, "the NodePort client's own address in the pod's log", func(ctx context.Context) error {
			b, err := kube.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{}).DoRaw(ctx)
			if want := "GET /nodeport from " + n.host.String() + ":"; err != nil || !strings.Contains(string(b), want) {
				return fmt.Errorf("no %q in the log (%v):\n%s", want, err, b)
			}
			return nil
		})

		// The kubernetes Service, as a pod's in-cluster client dials it.
		inCluster := rest.CopyConfig(api.Config)
		inCluster.Host = "https://" + harness.KubernetesServiceIP.String() + ":443"
		inCluster.Dial = dialIn(beside)
		if v, err := kubernetes.NewForConfigOrDie(inCluster).Discovery().ServerVersion(); err != nil {
			t.Errorf("the API server through the kubernetes Service: %v", err)
		} else {
			t.Logf("the API server through the kubernetes Service: %s", v.GitVersion)
		}

		n.Publish("controlplane.tailscale.com", n.ServicesIP(), nil)
		harness.Eventually(t, 30*time.Second, "a published name", func(ctx context.Context) error {
			addrs, err := dns.LookupHost(ctx, "controlplane.tailscale.com")
			if err != nil || len(addrs) != 1 || addrs[0] != n.ServicesIP().String() {
				return fmt.Errorf("%v, %v; want %s", addrs, err, n.ServicesIP())
			}
			return nil
		})
	})

	t.Run("Delete", func(t *testing.T) {
		if err := kube.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, time.Minute, "the pod gone", func(ctx context.Context) error {
			if _, err := kube.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); err == nil {
				return fmt.Errorf("still there")
			}
			if procs := len(containerPIDs(n, "/program")); procs > 0 {
				return fmt.Errorf("%d container processes still running", procs)
			}
			return nil
		})
	})

	if len(n.Leftovers()) == 0 {
		t.Error("Leftovers sees nothing of a running node")
	}
	n.Stop() // fails the test if Leftovers lists anything
	if after := hostState(); after != hostBefore {
		t.Errorf("the node changed the host:\nbefore %s\nafter  %s", hostBefore, after)
	}
}

// hostState is what a node must not change on the host: the host-wide
// kernel settings the kubelet sets to its own values, and folders
// containerd and the kubelet make by default.
func hostState() string {
	var b strings.Builder
	for _, k := range kubeletSysctls {
		v, _ := os.ReadFile("/proc/sys/" + k.path)
		fmt.Fprintf(&b, "%s=%s ", k.path, strings.TrimSpace(string(v)))
	}
	for _, d := range []string{"/opt/containerd", "/usr/libexec/kubernetes", "/var/lib/kubelet", "/var/lib/cni", "/etc/cni"} {
		_, err := os.Stat(d)
		fmt.Fprintf(&b, "%s:%t ", d, err == nil)
	}
	return b.String()
}

// dialIn dials from inside network namespace ns: the socket is made by a
// thread that joins ns and ends with its goroutine (it is never unlocked),
// and is used from anywhere after.
func dialIn(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type dialed struct {
			c   net.Conn
			err error
		}
		ch := make(chan dialed, 1)
		go func() {
			runtime.LockOSThread()
			f, err := os.Open("/run/netns/" + ns)
			if err != nil {
				ch <- dialed{nil, err}
				return
			}
			defer func() { _ = f.Close() }()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- dialed{nil, err}
				return
			}
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			ch <- dialed{c, err}
		}()
		d := <-ch
		return d.c, d.err
	}
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// containerPIDs are the node's processes running exe (as their mount
// namespace names it).
func containerPIDs(n *Node, exe string) []int {
	var out []int
	for _, pid := range cgroupProcs(n.l.Cgroup) {
		if p, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); p == exe {
			out = append(out, pid)
		}
	}
	return out
}

// containerStatus is /proc/<pid>/status of the one process running exe.
func containerStatus(t *testing.T, n *Node, exe string) map[string]string {
	t.Helper()
	pids := containerPIDs(n, exe)
	if len(pids) != 1 {
		t.Fatalf("%d processes run %s in the node, want 1", len(pids), exe)
	}
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pids[0]), "status"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
