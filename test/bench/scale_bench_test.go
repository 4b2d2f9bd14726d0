package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// BenchmarkScale runs one provider against SCALE_RELAYS RelayConfigs (1,000
// by default), each with a Service that has an ingress address, and reports
// the time to converge all, the process's peak RSS, the provider's API
// requests per converged object, and its writes in a quiet steady state
// (which must be zero: no hot loops). One iteration is the whole run.
func BenchmarkScale(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("SCALE_RELAYS")); err == nil && v > 0 {
		n = v
	}
	reqs := &providertest.RequestCounter{}
	pe := providertest.Start(b, providertest.Options{Poll: time.Hour, Requests: reqs})
	c := pe.Client
	ctx := context.Background()
	wc, err := client.NewWithWatch(pe.API.Config, client.Options{Scheme: c.Scheme()})
	must(b, err)
	w, err := wc.Watch(ctx, &corev1.SecretList{}, client.InNamespace(pe.NS))
	must(b, err)
	defer w.Stop()

	for b.Loop() {
		start := time.Now()
		for i := range n {
			name := fmt.Sprintf("relay-%d", i)
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pe.NS},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: 41641}}},
			}
			must(b, c.Create(ctx, svc))
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("198.51.%d.%d", i/250, i%250+1)}}
			must(b, c.Status().Update(ctx, svc))
			must(b, c.Create(ctx, &v1alpha1.RelayConfig{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pe.NS},
				Spec: v1alpha1.RelayConfigSpec{
					ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
					ForProvider:         v1alpha1.RelayConfigParameters{ServiceRef: &v1alpha1.LocalRef{Name: name}, ConfigSecretName: name + "-config", Hostname: name, Port: 41641},
				},
			}))
		}
		done := map[string]bool{}
		deadline := time.After(10 * time.Minute)
		for len(done) < n {
			select {
			case ev := <-w.ResultChan():
				if s, ok := ev.Object.(*corev1.Secret); ok && ev.Type != watch.Deleted && strings.Contains(string(s.Data[tsconfig.FileName]), ":41641") {
					done[s.Name] = true
				}
			case <-deadline:
				b.Fatalf("only %d of %d configs converged", len(done), n)
			}
		}
		converge := time.Since(start)
		// Let status updates and Ready conditions settle, then watch a
		// quiet period: no writes may happen in it.
		time.Sleep(5 * time.Second)
		before := reqs.Count()
		time.Sleep(5 * time.Second)
		after := reqs.Count()
		steadyWrites := 0
		for _, v := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			steadyWrites += after[v] - before[v]
		}
		total := 0
		for _, v := range before {
			total += v
		}
		b.ReportMetric(converge.Seconds(), "converge-s")
		b.ReportMetric(float64(total)/float64(n), "requests/object")
		b.ReportMetric(float64(steadyWrites), "steady-writes")
		b.ReportMetric(peakRSSMiB(b), "peak-RSS-MiB")
		b.ReportMetric(float64(n), "relays")
		b.Logf("provider requests by verb after convergence: %v", before)
		if steadyWrites != 0 {
			b.Errorf("the provider wrote %d times in a quiet steady state: a hot loop (%v -> %v)", steadyWrites, before, after)
		}
	}
}

// peakRSSMiB is this process's high-water resident set: the provider, its
// caches and the test's own client (the API server and etcd run apart).
func peakRSSMiB(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	must(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if f, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "kB")))
			must(b, err)
			return float64(kb) / 1024
		}
	}
	return 0
}
