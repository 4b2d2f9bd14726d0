// Package kubelet is the test cluster's one node: a scheduler and kubelet
// that run each pod for real (Node) or, for benchmarks at scale, a hollow
// one that only reports pods Running (runHollow).
package kubelet

import (
	"context"
	"crypto/tls"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/peerrelay/peerrelay/test/harness"
)

// NodeName is the one node of the test cluster.
const NodeName = "node-0"

// Node is the test cluster's node: it binds every pod to itself as a
// scheduler would, and runs it as a kubelet would. An image from the test's
// registry (our packages, which Crossplane's package runtime runs as
// Deployments) is pulled for this machine's architecture and unpacked as
// the pod's root; its entrypoint, command, env and user apply as a
// kubelet applies them. The tailscale image is played: a container without
// a command runs containerboot (built from tailscale.com v1.102.5) with
// tailscaled and tailscale on its PATH. Each pod gets its own network
// namespace and address on a bridge, and a private mount namespace whose root is the pod's own folder: the
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
	o     Options

	mu   sync.Mutex
	pods map[types.UID]*podRun
	hold func(*corev1.Pod) bool // pods not run (Hold)
}

// Options are what the node's world looks like from inside a pod.
type Options struct {
	// Hosts are extra /etc/hosts entries in every pod (a name the test
	// serves, such as Tailscale's control server, on the services address).
	Hosts []string
	// TrustedCA is added to every pod's CA bundle: the CA of the
	// certificates the test's servers show.
	TrustedCA []byte
	// Hollow runs no pod: each is bound and reported Running and Ready
	// at once (see runHollow). For control-plane benchmarks at scale.
	Hollow bool
	// Registry is where images other than tailscale's are pulled from
	// (the test's registry, answering as the packages' real host).
	Registry Registry
}

// Registry is an image registry the node pulls from.
type Registry interface {
	// Name is the registry host images are named under.
	Name() string
	// Transport reaches it, trusting its certificate.
	Transport() http.RoundTripper
}

// Start starts the node against the API server admin reaches, as cluster
// admin; it stops every pod's processes and removes its network when the
// test ends.
func Start(t testing.TB, admin *rest.Config, o Options) *Node {
	t.Helper()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(admin, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{admin: kube, cs: cs, o: o, pods: map[types.UID]*podRun{}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{corev1.LabelHostname: NodeName}}}
	if err := kube.Create(context.Background(), node); err != nil && !kerrors.IsAlreadyExists(err) {
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
		harness.Tool(t, tool)
	}
	n.net, n.dir, n.bin = startPodNetwork(t), t.TempDir(), harness.ToolsDir(t)
	apiServer, err := url2hostport(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	stopProxy := proxyTCP(t, net.JoinHostPort(harness.KubernetesServiceIP.String(), "443"), apiServer)
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
				t.Logf("---- pod %s/%s output (last 32 KiB) ----\n%s", r.ns, r.name, harness.Tail(r.log.String(), 32<<10))
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

// Hold stops the pods match selects and keeps them from running until
// release is called, while the API still shows them: a node that lost
// them. Use it to take a package's pod down (a provider crashed or
// lagging) under a runtime that would replace a deleted pod at once.
func (n *Node) Hold(match func(*corev1.Pod) bool) (release func()) {
	n.mu.Lock()
	n.hold = match
	n.mu.Unlock()
	// Return once no held pod runs (the node's next pass stops them).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		running := false
		n.mu.Lock()
		for _, r := range n.pods {
			running = running || match(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}})
		}
		n.mu.Unlock()
		if !running {
			break
		}
	}
	return func() {
		n.mu.Lock()
		n.hold = nil
		n.mu.Unlock()
	}
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

// LogsByPrefix returns what the containers of the pods in ns whose names
// start with prefix printed so far, by pod name: a Deployment's pods.
func (n *Node) LogsByPrefix(ns, prefix string) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]string{}
	for _, r := range n.pods {
		if r.ns == ns && strings.HasPrefix(r.name, prefix) {
			out[r.name] = r.log.String()
		}
	}
	return out
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
		held := n.hold != nil && n.hold(p)
		n.mu.Unlock()
		if held && p.DeletionTimestamp == nil {
			if r != nil {
				r.stop(time.Second)
				n.mu.Lock()
				delete(n.pods, p.UID)
				n.mu.Unlock()
			}
			if w := p.Status.ContainerStatuses; len(w) != 1 || w[0].State.Waiting == nil || w[0].State.Waiting.Reason != "Held" {
				n.setWaiting(ctx, p, "Held", "the test holds this pod off the node")
			}
			continue
		}
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
		ns: p.Namespace, name: p.Name, uid: p.UID, log: &harness.SyncBuffer{}, dir: filepath.Join(n.dir, string(p.UID)),
		quit: make(chan struct{}), exited: make(chan struct{}),
	}
	if image := p.Spec.Containers[0].Image; !tailscaleImage(image) {
		cfg, err := n.pullImage(ctx, image, filepath.Join(r.dir, "root"))
		if err != nil {
			_ = os.RemoveAll(r.dir)
			n.setWaiting(ctx, p, "ErrImagePull", err.Error())
			return
		}
		r.image = cfg
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
		r.ip, p.Name, harness.KubernetesServiceIP)
	n.mu.Lock()
	o := n.o
	n.mu.Unlock()
	for _, h := range o.Hosts {
		hosts += h + "\n"
	}
	files := map[string][]byte{
		"etc/hosts":       []byte(hosts),
		"etc/resolv.conf": []byte("nameserver " + n.net.Gateway.String() + "\noptions ndots:5\n"),
	}
	if r.image == nil {
		// The played tailscale image: the host's CA bundle stands in for
		// the image's. A pulled image keeps its own.
		bundle, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		files["etc/ssl/certs/ca-certificates.crt"] = append(bundle, o.TrustedCA...)
	}
	for f, b := range files {
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
	now := metav1.Now()
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: reason},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: reason},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
	}}
	_ = n.admin.Status().Patch(ctx, p, client.MergeFrom(orig))
}

// probe runs a readiness probe (HTTP GET or TCP connect) against the pod's
// address; a port may be named after one of the container's ports.
func probe(ip netip.Addr, c *corev1.Container, rp *corev1.Probe) bool {
	timeout := time.Duration(max(rp.TimeoutSeconds, 1)) * time.Second
	port := func(p intstr.IntOrString) string {
		if p.Type == intstr.String {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					return strconv.Itoa(int(cp.ContainerPort))
				}
			}
			return "0"
		}
		return strconv.Itoa(p.IntValue())
	}
	switch {
	case rp.HTTPGet != nil:
		h := rp.HTTPGet
		scheme := strings.ToLower(string(h.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		cl := &http.Client{Timeout: timeout, Transport: &http.Transport{
			// As the kubelet: an HTTPS probe does not verify the certificate.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's own behaviour
		}}
		resp, err := cl.Get(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(ip.String(), port(h.Port)), path.Clean("/"+h.Path)))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case rp.TCPSocket != nil:
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), port(rp.TCPSocket.Port)), timeout)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
	return true // exec and gRPC probes: not used by our pods
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
	for _, d := range []string{"dev", "proc", "tmp"} {
		mkdir(d)
	}
	if r.image == nil {
		mkdir("usr/local/bin")
	}
	for _, m := range r.mounts {
		mkdir(m.target)
	}
	s = append(s, fmt.Sprintf("mount --bind %s %s", q(root), q(root)))
	if r.image == nil {
		bind(bin, "usr/local/bin", true)
	}
	bind("/dev", "dev", false)
	bind("/proc", "proc", false)
	for _, m := range r.mounts {
		bind(m.source, m.target, m.readOnly)
	}
	if readOnlyRoot {
		s = append(s, fmt.Sprintf("mount -o remount,bind,ro %s", q(root)))
	}
	argv := r.argv(c)
	for i := range argv {
		argv[i] = q(argv[i])
	}
	s = append(s, fmt.Sprintf("cd / && exec chroot --userspec=%d:%d %s %s", uid, gid, q(root), strings.Join(argv, " ")))
	return strings.Join(s, "\n")
}

// argv is what the container runs, as a kubelet combines the container's
// command and args with the image's entrypoint and cmd.
func (r *podRun) argv(c *corev1.Container) []string {
	entrypoint, cmd := []string{"/usr/local/bin/containerboot"}, []string(nil)
	if r.image != nil {
		entrypoint, cmd = r.image.Entrypoint, r.image.Cmd
	}
	switch {
	case len(c.Command) > 0:
		return append(append([]string{}, c.Command...), c.Args...)
	case len(c.Args) > 0:
		return append(append([]string{}, entrypoint...), c.Args...)
	default:
		return append(append([]string{}, entrypoint...), cmd...)
	}
}

// identity is the user and group the container runs as: the image's,
// unless the pod or container says otherwise.
func identity(p *corev1.Pod, c *corev1.Container, image *v1.Config) (uid, gid int64, readOnlyRoot bool) {
	uid, gid = imageUser(image)
	if ps := p.Spec.SecurityContext; ps != nil {
		uid, gid = ptr.Deref(ps.RunAsUser, uid), ptr.Deref(ps.RunAsGroup, gid)
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
	env, err := n.containerEnv(context.Background(), p, c, r.image)
	if err != nil {
		return nil, err
	}
	uid, gid, ro := identity(p, c, r.image)
	cmd := exec.Command("ip", "netns", "exec", r.netns, "/bin/sh", "-c", r.runtimeScript(n.bin, c, uid, gid, ro))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// ServicesIP is an address on the host that every pod reaches: where the
// test serves what pods talk to (Tailscale's control server, APIs).
func (n *Node) ServicesIP() net.IP { return net.ParseIP(n.net.Services.String()) }

// Publish makes host resolve to ip in pods started from now on, and their
// CA bundle trust ca: a server the test runs (Tailscale's control plane)
// as the pods would find the real one.
func (n *Node) Publish(host string, ip net.IP, ca []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.o.Hosts = append(n.o.Hosts, ip.String()+"\t"+host)
	n.o.TrustedCA = append(n.o.TrustedCA, ca...)
}

// TestHost makes a host of the test's own on the node's network: a network
// namespace with an address on the pods' bridge, removed when the test
// ends. It returns the namespace's name, for ip netns exec, and its
// address.
func (n *Node) TestHost(t testing.TB) (string, netip.Addr) {
	t.Helper()
	ns, addr, err := n.net.add()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNetns(ns) })
	return ns, addr
}
