package kubelet

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// hollowIPs numbers the addresses a hollow node reports for its pods.
var hollowIPs atomic.Uint32

// runHollow is the node as kubemark's hollow kubelet is: it binds every pod
// and reports it Running and Ready at once, and removes a deleted one,
// without starting anything. It is for measuring the control plane at a
// scale at which this machine cannot run a tailscaled per pod; nothing of a
// pod's containers, volumes or probes runs. It follows pods through a
// watch, as a kubelet does.
func (n *Node) runHollow(ctx context.Context) {
	lw := cache.NewListWatchFromClient(n.cs.CoreV1().RESTClient(), "pods", "", fields.Everything())
	harness.Follow(ctx, lw, func(ev watch.Event) {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
			n.hollowSync(ctx, p)
		}
	}, nil)
}

// hollowSync moves a pod one step: bound, then Ready, then (once deleted)
// gone. Each step's write comes back as the event for the next.
func (n *Node) hollowSync(ctx context.Context, p *corev1.Pod) {
	switch {
	case p.DeletionTimestamp != nil:
		n.removePod(ctx, p)
	case p.Spec.NodeName == "":
		_ = n.cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: NodeName},
		}, metav1.CreateOptions{})
	case p.Status.Phase != corev1.PodRunning:
		orig := p.DeepCopy()
		now := metav1.Now()
		ip := hollowIPs.Add(1)
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
