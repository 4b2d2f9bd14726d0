package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// BenchmarkIngressToConfig measures, per event, the time from a Service
// getting a new load balancer address to its config Secret advertising it,
// with the provider's poll set to an hour so only watches count. Run it
// with -benchtime 200x for 200 events. The anchors poll every 15 s
// (tailscale-svc-lb) or requeue every 30 s (the Tailscale operator).
func BenchmarkIngressToConfig(b *testing.B) {
	pe := providertest.Start(b, providertest.Options{Poll: time.Hour})
	c := pe.Client
	ctx := context.Background()
	const replicas = 5
	for i := range replicas {
		name := fmt.Sprintf("relay-%d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pe.NS},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: 41641}}},
		}
		must(b, c.Create(ctx, svc))
		must(b, c.Create(ctx, &v1alpha1.RelayConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pe.NS},
			Spec: v1alpha1.RelayConfigSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
				ForProvider:         v1alpha1.RelayConfigParameters{ServiceRef: &v1alpha1.LocalRef{Name: name}, ConfigSecretName: name + "-config", Hostname: name, Port: 41641},
			},
		}))
	}
	wc, err := client.NewWithWatch(pe.API.Config, client.Options{Scheme: c.Scheme()})
	must(b, err)
	w, err := wc.Watch(ctx, &corev1.SecretList{}, client.InNamespace(pe.NS))
	must(b, err)
	defer w.Stop()

	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("relay-%d", i%replicas)
		ip := fmt.Sprintf("198.51.%d.%d", (i/250)%250, i%250+1)
		svc := &corev1.Service{}
		must(b, c.Get(ctx, types.NamespacedName{Namespace: pe.NS, Name: name}, svc))
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		start := time.Now()
		must(b, c.Status().Update(ctx, svc))
		want := ip + ":41641"
		deadline := time.After(30 * time.Second)
	wait:
		for {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Error {
					b.Fatalf("watch error: %v", ev.Object)
				}
				s, ok := ev.Object.(*corev1.Secret)
				if ok && s.Name == name+"-config" && strings.Contains(string(s.Data[tsconfig.FileName]), `"`+want+`"`) {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-deadline:
				b.Fatalf("config Secret %s never advertised %s", name+"-config", want)
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "events")
}

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
