// Package kubelet is the test cluster's one node: a scheduler and kubelet
// that run each pod for real (Node) or, for benchmarks at scale, a hollow
// one that only reports pods Running (runHollow).
package kubelet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	// ports forwards hostPorts and NodePorts from the node's address.
	ports *portMap
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
	// The node's address is the bridge's: pods and test hosts reach it. It
	// has no ExternalIP, as on most bare-metal clusters.
	n.ports = &portMap{node: n.net.Gateway}
	orig := node.DeepCopy()
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.net.Gateway.String()}, {Type: corev1.NodeHostName, Address: NodeName}}
	if err := kube.Status().Patch(context.Background(), node, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	apiServer, err := harness.HostPort(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	stopProxy := harness.ProxyTCP(t, net.JoinHostPort(harness.KubernetesServiceIP.String(), "443"), apiServer)
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
		n.ports.close()
	})
	return n
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
	n.ports.sync(n.mappedPorts(ctx, pods.Items))
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

// Address is the node's InternalIP (it has no ExternalIP): where its
// hostPorts and NodePorts are reached.
func (n *Node) Address() netip.Addr { return n.net.Gateway }

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

// HostAddress gives the host addr as well, on the pods' bridge: an address
// the pods reach through their default route, where the test serves what
// stands for a cloud's (a load balancer's front address). It goes when
// the test ends, and with the bridge at the latest.
func (n *Node) HostAddress(t testing.TB, addr netip.Addr) {
	t.Helper()
	if err := ip("addr", "add", addr.String()+"/32", "dev", n.net.bridge); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ip("addr", "del", addr.String()+"/32", "dev", n.net.bridge) })
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
