package crossplane

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// cloud stands in for what a cluster in a cloud has and this one does not:
// a cloud controller that gives every LoadBalancer Service an ingress IP.
// It only writes status, as one would. (The pods run on kubelet.Node.) It
// follows Services through a watch, as a controller does: a list every
// fraction of a second would load the API server with every Service of a
// scale benchmark.
type cloud struct {
	c  client.Client
	cs kubernetes.Interface

	mu        sync.Mutex
	addresses map[string]string // namespace/name: a replaced load balancer's address
}

// setAddress gives Service ns/name a new load balancer address, as when its
// NLB is replaced, and writes it at once.
func (cl *cloud) setAddress(ctx context.Context, ns, name, ip string) error {
	cl.mu.Lock()
	if cl.addresses == nil {
		cl.addresses = map[string]string{}
	}
	cl.addresses[ns+"/"+name] = ip
	cl.mu.Unlock()
	svc := &corev1.Service{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return err
	}
	return cl.assign(ctx, svc)
}

// lbAddress is the ingress IP for replica i's Service: 203.0.113.(10+i),
// the addresses the README shows.
func (cl *cloud) lbAddress(svc *corev1.Service) string {
	cl.mu.Lock()
	ip, ok := cl.addresses[svc.Namespace+"/"+svc.Name]
	cl.mu.Unlock()
	if ok {
		return ip
	}
	replica, ok := svc.Labels["peerrelay.io/replica"]
	if !ok { // the Tailscale operator's (BenchmarkSideBySide)
		replica = svc.Labels["tailscale.com/peer-relay-replica"]
	}
	i, err := strconv.Atoi(replica)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("203.0.113.%d", 10+i)
}

// run reconciles every Service it is told of until ctx ends.
func (cl *cloud) run(ctx context.Context) {
	lw := cache.NewListWatchFromClient(cl.cs.CoreV1().RESTClient(), "services", "", fields.Everything())
	harness.Follow(ctx, lw, func(ev watch.Event) {
		if svc, ok := ev.Object.(*corev1.Service); ok && ev.Type != watch.Deleted {
			_ = cl.assign(ctx, svc)
		}
	}, nil)
}

// assign writes the Service's load balancer address when it lacks it.
func (cl *cloud) assign(ctx context.Context, svc *corev1.Service) error {
	ip := cl.lbAddress(svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || ip == "" {
		return nil
	}
	if ing := svc.Status.LoadBalancer.Ingress; len(ing) == 1 && ing[0].IP == ip {
		return nil
	}
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	return cl.c.Status().Patch(ctx, svc, client.MergeFrom(orig))
}
