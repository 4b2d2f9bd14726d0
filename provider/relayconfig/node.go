package relayconfig

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/resolve"
)

// nodePoll is how often a RelayConfig advertising its pod's node is
// resolved again: a pod rescheduled to another node is advertised there
// within it. Neither pods nor nodes are watched (a cluster-wide cache of
// either would cost every provider its memory for a few replicas).
const nodePoll = time.Minute

// nodePollInterval shortens the poll of a RelayConfig with
// spec.forProvider.node (managed.PollIntervalHook).
func nodePollInterval(mg resource.Managed, poll time.Duration) time.Duration {
	if rc, ok := mg.(*v1alpha1.RelayConfig); ok && rc.Spec.ForProvider.Node != nil && nodePoll < poll {
		return nodePoll
	}
	return poll
}

// nodeEndpoints resolves a replica advertised on its node: the node its pod
// runs on, read past the cache, and the port that reaches the relay there
// (the Service's node port, or the relay's own port bound on the host). A
// pod not yet scheduled, or a node port not yet allocated, is pending: no
// addresses, no error.
func (e *external) nodeEndpoints(ctx context.Context, mg *v1alpha1.RelayConfig, svc *corev1.Service) (resolve.Result, error) {
	p := mg.Spec.ForProvider
	port := uint16(p.Port)
	if p.Node.Mode == v1alpha1.NodeModeNodePort {
		if svc == nil || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
			return resolve.FromNode(nil, false, 0, p.StaticEndpoints)
		}
		port = uint16(svc.Spec.Ports[0].NodePort)
	}
	pod := &corev1.Pod{}
	err := e.read.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: p.Node.Pod}, pod)
	if kerrors.IsNotFound(err) {
		return resolve.FromNode(nil, false, 0, p.StaticEndpoints)
	}
	if err != nil {
		return resolve.Result{}, fmt.Errorf("cannot get pod %s named by spec.forProvider.node.pod: %w", p.Node.Pod, err)
	}
	if pod.Spec.NodeName == "" {
		return resolve.FromNode(nil, false, 0, p.StaticEndpoints)
	}
	node := &corev1.Node{}
	if err := e.read.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil {
		return resolve.Result{}, fmt.Errorf("cannot get node %s of pod %s: %w", pod.Spec.NodeName, p.Node.Pod, err)
	}
	addrs, internal := nodeAddresses(node)
	return resolve.FromNode(addrs, internal, port, p.StaticEndpoints)
}

// nodeAddresses are a node's ExternalIP addresses, both families, or, when
// it has none (bare metal, most on-premises clusters), its InternalIP ones.
func nodeAddresses(n *corev1.Node) (addrs []netip.Addr, internal bool) {
	var external, in []netip.Addr
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		switch a.Type {
		case corev1.NodeExternalIP:
			external = append(external, ip.Unmap())
		case corev1.NodeInternalIP:
			in = append(in, ip.Unmap())
		}
	}
	if len(external) > 0 {
		return external, false
	}
	return in, len(in) > 0
}
