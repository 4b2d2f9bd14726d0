package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeName is the one node of the test cluster.
const NodeName = "node-0"

// Node is the test cluster's node: it binds every pod to itself as a
// scheduler would, and runs it as a kubelet would. Every image is taken to
// be the tailscale image: a container without a command runs containerboot
// (built from tailscale.com v1.102.5) with tailscaled and tailscale on its
// PATH. Each pod gets its own network namespace and address on a bridge,
// and a private mount namespace whose root is the pod's own folder: the
// binaries, /dev and /proc bound in, its volumes mounted where the pod spec
// says (Secrets in the kubelet's atomic ..data layout, kept up to date;
// the ServiceAccount token from the TokenRequest API), /etc/hosts and
// /etc/resolv.conf written as a kubelet does. The container runs as its
// securityContext's user, on a read-only root when it asks for one.
// Readiness comes from the pod's readinessProbe and is written into the
// pod's status; nothing else writes it.
type Node struct {
	net *podNetwork

	admin client.Client
	cs    kubernetes.Interface
	dir   string
	bin   string
	o     NodeOptions

	mu   sync.Mutex
	pods map[types.UID]*podRun
}

// NodeOptions are what the node's world looks like from inside a pod.
type NodeOptions struct {
	// Hosts are extra /etc/hosts entries in every pod (a name the test
	// serves, such as Tailscale's control server, on the services address).
	Hosts []string
	// TrustedCA is added to every pod's CA bundle: the CA of the
	// certificates the test's servers show.
	TrustedCA []byte
	// Hollow runs no pod: each is bound and reported Running and Ready
	// at once (see runHollow). For control-plane benchmarks at scale.
	Hollow bool
}

// StartNode starts the node; it stops every pod's processes and removes
// its network when the test ends.
func (c *Crossplane) StartNode(t testing.TB, o NodeOptions) *Node {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{admin: c.Admin, cs: cs, o: o, pods: map[types.UID]*podRun{}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{corev1.LabelHostname: NodeName}}}
	if err := c.Admin.Create(context.Background(), node); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if o.Hollow {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { n.runHollow(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return n
	}
	for _, tool := range []string{"containerboot", "tailscaled", "tailscale"} {
		Tool(t, tool)
	}
	n.net, n.dir, n.bin = startPodNetwork(t), t.TempDir(), ToolsDir(t)
	apiServer, err := url2hostport(c.AdminConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	stopProxy := proxyTCP(t, net.JoinHostPort(KubernetesServiceIP.String(), "443"), apiServer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		n.mu.Lock()
		runs := make([]*podRun, 0, len(n.pods))
		for _, r := range n.pods {
			runs = append(runs, r)
		}
		n.mu.Unlock()
		for _, r := range runs {
			r.stop(time.Second)
			if t.Failed() || os.Getenv("PEERRELAY_TEST_LOGS") != "" {
				t.Logf("---- pod %s/%s output (last 32 KiB) ----\n%s", r.ns, r.name, tail(r.log.String(), 32<<10))
			}
		}
		stopProxy()
	})
	return n
}

func url2hostport(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Port() == "" {
		return "", fmt.Errorf("API server address %q has no host:port", s)
	}
	return u.Host, nil
}

// proxyTCP forwards every connection to listen on to target (TLS passes
// through): the kubernetes Service, as kube-proxy would.
func proxyTCP(t testing.TB, listen, target string) func() {
	t.Helper()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = in.Close() }()
				out, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer func() { _ = out.Close() }()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return func() { _ = l.Close() }
}

// Logs returns what a pod's container printed so far.
func (n *Node) Logs(ns, name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.pods {
		if r.ns == ns && r.name == name {
			return r.log.String()
		}
	}
	return ""
}

// Socket is the tailscaled LocalAPI socket of a running pod (containerboot's
// default, /tmp/tailscaled.sock, in the pod's /tmp), or "".
func (n *Node) Socket(ns, name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.pods {
		if r.ns == ns && r.name == name {
			for _, m := range r.mounts {
				if m.target == "/tmp" {
					return filepath.Join(m.source, "tailscaled.sock")
				}
			}
		}
	}
	return ""
}

func (n *Node) run(ctx context.Context) {
	for ctx.Err() == nil {
		n.pass(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// pass binds new pods, starts what can start, refreshes volumes, and stops
// what was deleted.
func (n *Node) pass(ctx context.Context) {
	pods := &corev1.PodList{}
	if err := n.admin.List(ctx, pods); err != nil {
		return
	}
	seen := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		seen[p.UID] = true
		if p.Spec.NodeName == "" {
			_ = n.cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: NodeName},
			}, metav1.CreateOptions{})
			continue
		}
		n.mu.Lock()
		r := n.pods[p.UID]
		n.mu.Unlock()
		switch {
		case p.DeletionTimestamp != nil:
			if r != nil {
				go n.terminate(r, p)
			} else {
				n.removePod(ctx, p)
			}
		case r == nil:
			n.admit(ctx, p)
		default:
			r.refresh(ctx, n, p)
		}
	}
	n.mu.Lock()
	var gone []*podRun
	for uid, r := range n.pods {
		if !seen[uid] {
			gone = append(gone, r)
			delete(n.pods, uid)
		}
	}
	n.mu.Unlock()
	for _, r := range gone {
		r.stop(time.Second)
	}
}

// removePod is the kubelet's last word on a pod it no longer runs.
func (n *Node) removePod(ctx context.Context, p *corev1.Pod) {
	_ = n.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID},
	})
}

// terminate stops a deleted pod's container within its grace period and
// then removes the pod.
func (n *Node) terminate(r *podRun, p *corev1.Pod) {
	if !r.terminating.CompareAndSwap(false, true) {
		return
	}
	grace := 30 * time.Second
	if s := p.DeletionGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	r.stop(grace)
	n.mu.Lock()
	delete(n.pods, p.UID)
	n.mu.Unlock()
	n.removePod(context.Background(), p)
}

// admit prepares a pod's sandbox (network, volumes) and starts its
// container; a pod whose volumes cannot be made yet waits for a later pass.
func (n *Node) admit(ctx context.Context, p *corev1.Pod) {
	if len(p.Spec.Containers) != 1 {
		n.setWaiting(ctx, p, "Unsupported", "the test node runs pods with one container")
		return
	}
	r := &podRun{
		ns: p.Namespace, name: p.Name, uid: p.UID, log: &SyncBuffer{}, dir: filepath.Join(n.dir, string(p.UID)),
		quit: make(chan struct{}), exited: make(chan struct{}),
	}
	mounts, err := n.prepareVolumes(ctx, p, r)
	if err != nil {
		_ = os.RemoveAll(r.dir)
		if errors.Is(err, errWaiting) {
			n.setWaiting(ctx, p, "ContainerCreating", err.Error())
		} else {
			n.setWaiting(ctx, p, "CreateContainerConfigError", err.Error())
		}
		return
	}
	r.mounts = mounts
	if r.netns, r.ip, err = n.net.add(); err != nil {
		n.setWaiting(ctx, p, "CreatePodSandboxError", err.Error())
		return
	}
	if err := n.writeEtc(r, p); err != nil {
		removeNetns(r.netns)
		_ = os.RemoveAll(r.dir)
		n.setWaiting(ctx, p, "CreatePodSandboxError", err.Error())
		return
	}
	p.Status.PodIP = r.ip.String()
	n.mu.Lock()
	n.pods[p.UID] = r
	n.mu.Unlock()
	go r.supervise(n, p.DeepCopy())
}

type mount struct {
	source, target string
	readOnly       bool
	volume         string
	files          bool // written by the node from a Secret, ConfigMap or token
	mode           os.FileMode
}

// prepareVolumes materialises every volume the container mounts.
func (n *Node) prepareVolumes(ctx context.Context, p *corev1.Pod, r *podRun) ([]mount, error) {
	c := &p.Spec.Containers[0]
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s names no volume", vm.Name)
		}
		dir := filepath.Join(r.dir, "volumes", v.Name)
		m := mount{source: dir, target: vm.MountPath, readOnly: vm.ReadOnly, volume: v.Name, mode: 0o644}
		if v.EmptyDir != nil {
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, err
			}
		} else {
			files, err := n.volumeFiles(ctx, p, v)
			if err != nil {
				return nil, err
			}
			if v.Secret != nil && v.Secret.DefaultMode != nil {
				m.mode = os.FileMode(*v.Secret.DefaultMode)
			}
			if _, err := writeAtomic(dir, files, m.mode); err != nil {
				return nil, err
			}
			m.files = true
		}
		if vm.SubPath != "" {
			return nil, fmt.Errorf("volumeMount %s: subPath is not supported by the test node", vm.Name)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// writeEtc writes the files a kubelet manages in every container: hosts
// and resolv.conf; and the image's CA bundle with the test's CA added.
func (n *Node) writeEtc(r *podRun, p *corev1.Pod) error {
	root := filepath.Join(r.dir, "root")
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n%s\t%s\n%s\tkubernetes.default.svc kubernetes.default kubernetes\n",
		r.ip, p.Name, KubernetesServiceIP)
	n.mu.Lock()
	o := n.o
	n.mu.Unlock()
	for _, h := range o.Hosts {
		hosts += h + "\n"
	}
	bundle, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	bundle = append(bundle, o.TrustedCA...)
	for f, b := range map[string][]byte{
		"etc/hosts":                         []byte(hosts),
		"etc/resolv.conf":                   []byte("nameserver " + n.net.Gateway.String() + "\noptions ndots:5\n"),
		"etc/ssl/certs/ca-certificates.crt": bundle,
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) setWaiting(ctx context.Context, p *corev1.Pod, reason, msg string) {
	orig := p.DeepCopy()
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
	}}
	_ = n.admin.Status().Patch(ctx, p, client.MergeFrom(orig))
}

// probe runs an HTTP readiness probe against the pod's address.
func probe(ip netip.Addr, h *corev1.HTTPGetAction, timeout time.Duration) bool {
	port := h.Port.IntValue()
	if port == 0 {
		return false // named ports: not used by our pods
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	cl := &http.Client{Timeout: timeout}
	resp, err := cl.Get(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(ip.String(), strconv.Itoa(port)), path.Clean("/"+h.Path)))
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// runtimeScript is run in the pod's network namespace by `ip netns exec`,
// which also gives it a private mount namespace: it binds the pod's root
// together and switches into it as the container's user.
func (r *podRun) runtimeScript(bin string, c *corev1.Container, uid, gid int64, readOnlyRoot bool) string {
	root := filepath.Join(r.dir, "root")
	var s []string
	q := func(x string) string { return "'" + strings.ReplaceAll(x, "'", `'\''`) + "'" }
	mkdir := func(p string) { s = append(s, "mkdir -p "+q(filepath.Join(root, p))) }
	bind := func(src, dst string, ro bool) {
		s = append(s, fmt.Sprintf("mount --rbind %s %s", q(src), q(filepath.Join(root, dst))))
		if ro {
			s = append(s, fmt.Sprintf("mount -o remount,bind,ro %s", q(filepath.Join(root, dst))))
		}
	}
	s = append(s, "set -e")
	for _, d := range []string{"usr/local/bin", "dev", "proc", "tmp"} {
		mkdir(d)
	}
	for _, m := range r.mounts {
		mkdir(m.target)
	}
	s = append(s, fmt.Sprintf("mount --bind %s %s", q(root), q(root)))
	bind(bin, "usr/local/bin", true)
	bind("/dev", "dev", false)
	bind("/proc", "proc", false)
	for _, m := range r.mounts {
		bind(m.source, m.target, m.readOnly)
	}
	if readOnlyRoot {
		s = append(s, fmt.Sprintf("mount -o remount,bind,ro %s", q(root)))
	}
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) == 0 {
		argv = append([]string{"/usr/local/bin/containerboot"}, c.Args...)
	}
	for i := range argv {
		argv[i] = q(argv[i])
	}
	s = append(s, fmt.Sprintf("cd / && exec chroot --userspec=%d:%d %s %s", uid, gid, q(root), strings.Join(argv, " ")))
	return strings.Join(s, "\n")
}

// identity is the user and group the container runs as.
func identity(p *corev1.Pod, c *corev1.Container) (uid, gid int64, readOnlyRoot bool) {
	if ps := p.Spec.SecurityContext; ps != nil {
		uid, gid = ptr.Deref(ps.RunAsUser, 0), ptr.Deref(ps.RunAsGroup, 0)
	}
	if cs := c.SecurityContext; cs != nil {
		uid = ptr.Deref(cs.RunAsUser, uid)
		gid = ptr.Deref(cs.RunAsGroup, gid)
		readOnlyRoot = ptr.Deref(cs.ReadOnlyRootFilesystem, false)
	}
	return uid, gid, readOnlyRoot
}

// startContainer starts the container's processes in the pod's sandbox.
func (r *podRun) startContainer(n *Node, p *corev1.Pod) (*exec.Cmd, error) {
	c := &p.Spec.Containers[0]
	env, err := n.containerEnv(context.Background(), p, c)
	if err != nil {
		return nil, err
	}
	uid, gid, ro := identity(p, c)
	cmd := exec.Command("ip", "netns", "exec", r.netns, "/bin/sh", "-c", r.runtimeScript(n.bin, c, uid, gid, ro))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}
