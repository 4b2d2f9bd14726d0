package crossplane

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// cloud stands in for what a cluster in a cloud has and this one does not:
// a load balancer controller that gives every LoadBalancer Service an
// ingress address. It only writes status, as one would. (The pods run on
// the test's node.) It follows Services through a watch, as a controller does:
// a list every fraction of a second would load the API server with every
// Service of a scale benchmark.
//
// It hands out addresses as MetalLB does from its pools, named by a
// Service's metallb.io/address-pool annotation: the default pool is IPv4
// only; pool "dual-stack" also gives an IPv6 address to a Service whose
// spec.ipFamilies has IPv6; any other pool is one it does not have. No pool
// serves namespace team-edge (MetalLB's serviceAllocation.namespaces): a
// Service there, or naming an unknown pool, stays pending, as on a cluster
// without a load balancer for it.
type cloud struct {
	c  client.Client
	cs kubernetes.Interface

	mu        sync.Mutex
	addresses map[string]string // namespace/name: a replaced load balancer's address
	// proxied are the addresses of load balancers the test runs on the host
	// (cloudharness.UDPLoadBalancer): their ingress says ipMode Proxy, as a
	// proxying cloud load balancer's does, so that a real node's kube-proxy
	// sends traffic for them to the load balancer rather than straight to
	// the Service's pods.
	proxied map[string]bool
}

// Address pools (metallb.io/address-pool).
const (
	annotationPool = "metallb.io/address-pool"
	poolDualStack  = "dual-stack"
	// namespaceNoPool is served by no pool.
	namespaceNoPool = "team-edge"
)

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

// proxy marks ip as a proxying load balancer's address (proxied).
func (cl *cloud) proxy(ip string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.proxied == nil {
		cl.proxied = map[string]bool{}
	}
	cl.proxied[ip] = true
}

// lbAddresses are the ingress IPs for replica i's Service: 203.0.113.(10+i),
// the addresses the README shows, and 2001:db8::(10+i) from the dual-stack
// pool.
func (cl *cloud) lbAddresses(svc *corev1.Service) []string {
	pool := svc.Annotations[annotationPool]
	if (pool != "" && pool != poolDualStack) || svc.Namespace == namespaceNoPool {
		return nil
	}
	cl.mu.Lock()
	ip, ok := cl.addresses[svc.Namespace+"/"+svc.Name]
	cl.mu.Unlock()
	if ok {
		return []string{ip}
	}
	replica, ok := svc.Labels["peerrelay.io/replica"]
	if !ok { // the Tailscale operator's (BenchmarkSideBySide)
		replica = svc.Labels["tailscale.com/peer-relay-replica"]
	}
	i, err := strconv.Atoi(replica)
	if err != nil {
		return nil
	}
	out := []string{fmt.Sprintf("203.0.113.%d", 10+i)}
	if pool == poolDualStack && slices.Contains(svc.Spec.IPFamilies, corev1.IPv6Protocol) {
		out = append(out, fmt.Sprintf("2001:db8::%d", 10+i))
	}
	return out
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

// assign writes the Service's load balancer addresses when it lacks them.
func (cl *cloud) assign(ctx context.Context, svc *corev1.Service) error {
	ips := cl.lbAddresses(svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(ips) == 0 {
		return nil
	}
	ingress := make([]corev1.LoadBalancerIngress, len(ips))
	cl.mu.Lock()
	for i, ip := range ips {
		ingress[i].IP = ip
		if cl.proxied[ip] {
			ingress[i].IPMode = ptr.To(corev1.LoadBalancerIPModeProxy)
		}
	}
	cl.mu.Unlock()
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer.Ingress, ingress) {
		return nil
	}
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = ingress
	return cl.c.Status().Patch(ctx, svc, client.MergeFrom(orig))
}
