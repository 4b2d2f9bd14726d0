package e2e

import (
	"context"
	"fmt"
	"net"
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
	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
	"github.com/peerrelay/peerrelay/test/harness"
)

// hostileReplicas is how many unreachable replicas the hostile tenant runs.
const hostileReplicas = 100

// BenchmarkProbeFairness measures one tenant's LB address → config (its
// Service's new ingress address until its config Secret advertises it)
// alone, then beside another tenant whose 100 replicas each claim a real
// relay device and advertise addresses that never answer, so that every
// probe of them waits out the probe timeout. Both in one run, one
// provider, probing on: the second figure over the first is what the
// hostile tenant costs the victim.
func BenchmarkProbeFairness(b *testing.B) {
	ctx := context.Background()
	api := tailnettest.StartFakeAPI(b)
	w := startWorldWith(b, v1alpha1.ProviderConfigSpec{
		Tailscale: &v1alpha1.TailscaleAPI{BaseURL: api.URL, OAuthSecretRef: v1alpha1.SecretRef{Name: "ts-oauth", Namespace: "default"}},
		Probe:     &v1alpha1.Probe{Tags: []string{"tag:probe"}, Interval: &metav1.Duration{Duration: v1alpha1.MinProbeInterval}},
	})
	pe, c := w.provider, w.provider.Client
	must(b, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ts-oauth"},
		Data: map[string][]byte{"client_id": []byte("client-id"), "client_secret": []byte("client-secret")}}))
	port, relay := w.runRelay(b, "127.0.0.1")
	st, err := relay.LocalClient.StatusWithoutPeers(ctx)
	must(b, err)
	hole, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	must(b, err)
	b.Cleanup(func() { _ = hole.Close() })

	measure := func(b *testing.B) {
		wc, err := client.NewWithWatch(pe.API.Config, client.Options{Scheme: c.Scheme()})
		must(b, err)
		watcher, err := wc.Watch(ctx, &corev1.SecretList{}, client.InNamespace(pe.NS))
		must(b, err)
		defer watcher.Stop()
		var lat []time.Duration
		for i := 0; b.Loop(); i++ {
			ip := fmt.Sprintf("198.51.100.%d", i%250+1)
			if strings.HasPrefix(b.Name(), "BenchmarkProbeFairness/beside") {
				ip = fmt.Sprintf("198.51.101.%d", i%250+1)
			}
			svc := &corev1.Service{}
			must(b, c.Get(ctx, types.NamespacedName{Namespace: pe.NS, Name: "relay-0"}, svc))
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
			start := time.Now()
			must(b, c.Status().Update(ctx, svc))
			lat = append(lat, waitAdvertised(b, watcher, "relay-0-config", fmt.Sprintf("%s:%d", ip, port), start))
		}
		b.StopTimer()
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
	}
	b.Run("alone", measure)
	hostile(b, w, string(st.Self.ID), hole.LocalAddr().String())
	b.Run(fmt.Sprintf("beside-%d-unreachable", hostileReplicas), measure)
}

// waitAdvertised waits for the config Secret name to advertise want and
// returns the time since start.
func waitAdvertised(b *testing.B, w watch.Interface, name, want string, start time.Time) time.Duration {
	deadline := time.After(time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				b.Fatalf("watch error: %v", ev.Object)
			}
			s, ok := ev.Object.(*corev1.Secret)
			if ok && s.Name == name && strings.Contains(string(s.Data[tsconfig.FileName]), `"`+want+`"`) {
				return time.Since(start)
			}
		case <-deadline:
			b.Fatalf("config Secret %s never advertised %s", name, want)
		}
	}
}

// hostile starts the hostile tenant: hostileReplicas RelayConfigs in
// namespace hostile, each with a state Secret naming device (a real relay
// the prober can reach) and a static endpoint that drops everything, and
// waits until their probes run.
func hostile(b *testing.B, w *world, device, silent string) {
	ctx := context.Background()
	c := w.provider.Client
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hostile"}}))
	for i := range hostileReplicas {
		name := fmt.Sprintf("h-%d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hostile"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: 41641}}},
		}
		must(b, c.Create(ctx, svc))
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("192.0.2.%d", i+1)}}
		must(b, c.Status().Update(ctx, svc))
		must(b, c.Create(ctx, &v1alpha1.RelayConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hostile"},
			Spec: v1alpha1.RelayConfigSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
				ForProvider: v1alpha1.RelayConfigParameters{
					ServiceRef: &v1alpha1.LocalRef{Name: name}, ConfigSecretName: name + "-config", StateSecretName: name + "-state",
					Hostname: name, Port: 41641, StaticEndpoints: []string{silent},
					AuthKeySecretRef: &v1alpha1.AuthKeyRef{Name: "ts-auth"},
				},
			},
		}))
	}
	// What containerboot would write, were the device theirs.
	for i := range hostileReplicas {
		harness.Eventually(b, time.Minute, "device ID in a hostile state Secret", func(ctx context.Context) error {
			s := &corev1.Secret{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: "hostile", Name: fmt.Sprintf("h-%d-state", i)}, s); err != nil {
				return err
			}
			s.Data = map[string][]byte{"device_id": []byte(device)}
			return c.Update(ctx, s)
		})
	}
	harness.Eventually(b, 2*time.Minute, "a hostile replica probed and found silent", func(ctx context.Context) error {
		l := &v1alpha1.RelayConfigList{}
		if err := c.List(ctx, l, client.InNamespace("hostile")); err != nil {
			return err
		}
		for _, rc := range l.Items {
			if rc.GetCondition(v1alpha1.ConditionReachable).Reason == v1alpha1.ReasonNoAnswer {
				return nil
			}
		}
		return fmt.Errorf("no hostile replica has Reachable NoAnswer yet")
	})
}
