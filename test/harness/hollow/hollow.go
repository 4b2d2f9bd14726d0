// Package hollow is the benchmarks' node, as kubemark's hollow kubelet
// is: it binds every pod to itself and reports it Running and Ready at
// once, and removes a deleted one, without starting anything. It is for
// measuring the control plane at a scale at which this machine cannot run
// a tailscaled per pod (a scale benchmark's thousand PeerRelays); the
// system tests run their pods on a real node (test/harness/node), which
// cannot run that many. Nothing of a pod's containers, volumes or probes
// runs here.
package hollow

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// NodeName is the hollow node's name.
const NodeName = "node-0"

// node is the hollow node's state: its clients and the pod addresses it
// has handed out.
type node struct {
	admin client.Client
	cs    kubernetes.Interface
	ips   atomic.Uint32
}

// Start registers the hollow node with the API server admin reaches, as
// cluster admin, and runs it until the test ends.
func Start(t testing.TB, admin *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(admin, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{admin: kube, cs: cs}
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{corev1.LabelHostname: NodeName}}}
	if err := kube.Create(context.Background(), obj); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// run follows pods through a watch, as a kubelet does: a list every
// fraction of a second would load the API server with every pod of a
// scale benchmark.
func (n *node) run(ctx context.Context) {
	lw := cache.NewListWatchFromClient(n.cs.CoreV1().RESTClient(), "pods", "", fields.Everything())
	harness.Follow(ctx, lw, func(ev watch.Event) {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
			n.sync(ctx, p)
		}
	}, nil)
}

// sync moves a pod one step: bound, then Ready, then (once deleted) gone.
// Each step's write comes back as the event for the next.
func (n *node) sync(ctx context.Context, p *corev1.Pod) {
	switch {
	case p.DeletionTimestamp != nil:
		_ = n.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID},
		})
	case p.Spec.NodeName == "":
		_ = n.cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: NodeName},
		}, metav1.CreateOptions{})
	case p.Status.Phase != corev1.PodRunning:
		orig := p.DeepCopy()
		now := metav1.Now()
		ip := n.ips.Add(1)
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = fmt.Sprintf("10.%d.%d.%d", 128+(ip>>16)&127, (ip>>8)&255, ip&255)
		p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
		p.Status.StartTime = &now
		c := p.Spec.Containers[0]
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		p.Status.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		_ = n.admin.Status().Patch(ctx, p, client.MergeFrom(orig))
	}
}
