package crossplane

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cloud stands in for what a cluster in a cloud has and this one does not:
// a cloud controller that gives every LoadBalancer Service an ingress IP.
// It only writes status, as one would. (The pods run on harness.Node.)
type cloud struct {
	c client.Client

	mu        sync.Mutex
	addresses map[string]string // namespace/name: a replaced load balancer's address
}

// setAddress gives a Service a new load balancer address, as when its NLB
// is replaced.
func (cl *cloud) setAddress(ns, name, ip string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.addresses == nil {
		cl.addresses = map[string]string{}
	}
	cl.addresses[ns+"/"+name] = ip
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
	i, err := strconv.Atoi(svc.Labels["peerrelay.io/replica"])
	if err != nil {
		return ""
	}
	return fmt.Sprintf("203.0.113.%d", 10+i)
}

// run reconciles until ctx ends.
func (cl *cloud) run(ctx context.Context) {
	for ctx.Err() == nil {
		cl.pass(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (cl *cloud) pass(ctx context.Context) {
	svcs := &corev1.ServiceList{}
	if err := cl.c.List(ctx, svcs); err == nil {
		for i := range svcs.Items {
			svc := &svcs.Items[i]
			ip := cl.lbAddress(svc)
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || ip == "" {
				continue
			}
			if ing := svc.Status.LoadBalancer.Ingress; len(ing) == 1 && ing[0].IP == ip {
				continue
			}
			orig := svc.DeepCopy()
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
			_ = cl.c.Status().Patch(ctx, svc, client.MergeFrom(orig))
		}
	}
}
