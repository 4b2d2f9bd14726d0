package relayconfig

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// relayMetrics is what containerboot serves for a relay that forwarded
// 120 + 8 packets over two address-family pairs, with one session bound and
// two allocations waiting: tailscaled's usermetrics, as in net/udprelay.
const relayMetrics = `# TYPE tailscaled_peer_relay_forwarded_packets_total counter
# HELP tailscaled_peer_relay_forwarded_packets_total Number of packets forwarded via Peer Relay
tailscaled_peer_relay_forwarded_packets_total{transport_in="udp4",transport_out="udp4"} 120
tailscaled_peer_relay_forwarded_packets_total{transport_in="udp6",transport_out="udp4"} 8
# TYPE tailscaled_peer_relay_forwarded_bytes_total counter
# HELP tailscaled_peer_relay_forwarded_bytes_total Number of bytes forwarded via Peer Relay
tailscaled_peer_relay_forwarded_bytes_total{transport_in="udp4",transport_out="udp4"} 15360
tailscaled_peer_relay_forwarded_bytes_total{transport_in="udp6",transport_out="udp4"} 1024
# TYPE tailscaled_peer_relay_endpoints gauge
# HELP tailscaled_peer_relay_endpoints Number of allocated Peer Relay endpoints
tailscaled_peer_relay_endpoints{state="connecting"} 2
tailscaled_peer_relay_endpoints{state="open"} 1
# TYPE tailscaled_health_messages gauge
tailscaled_health_messages{type="warning"} 0
`

func TestParseTraffic(t *testing.T) {
	cases := map[string]struct {
		reason  string
		body    string
		want    v1alpha1.TrafficSample
		wantErr string
	}{
		"Relay": {
			reason: "Packets and bytes are summed over every address family; sessions are the open endpoints only.",
			body:   relayMetrics,
			want:   v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: 128, ForwardedBytes: 16384},
		},
		"NoRelay": {
			reason:  "A tailscaled that runs no relay server exports no relay counters: that is said, not read as zero traffic.",
			body:    "# TYPE tailscaled_health_messages gauge\ntailscaled_health_messages{type=\"warning\"} 0\n",
			wantErr: "no tailscaled_peer_relay_forwarded_packets_total in the metrics",
		},
		"Garbage": {
			reason:  "What is not a metrics exposition is an error.",
			body:    "<html>hello</html>\n",
			wantErr: "no " + metricForwardedPackets,
		},
		"GarbageCounter": {
			reason:  "A relay counter's line that does not parse is an error.",
			body:    metricForwardedPackets + " many\n",
			wantErr: "text format parsing error",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseTraffic(strings.NewReader(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nerror %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSampleTraffic drives one RelayConfig's sampling over time against a
// pod's metrics endpoint served on loopback: at most once a minute, a
// sample equal to the last one leaves the status as it is, a pod that is
// not running keeps the last sample, and turning sampling off clears it.
func TestSampleTraffic(t *testing.T) {
	var packets atomic.Int64
	packets.Store(120)
	scrapes := atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapes.Add(1)
		_, _ = w.Write([]byte(strings.Replace(relayMetrics, "} 120\n", "} "+strconv.FormatInt(packets.Load(), 10)+"\n", 1)))
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	phase, owner, controller, hostNetwork := corev1.PodRunning, "my-relay-0", true, false
	read := &test.MockClient{MockGet: func(_ context.Context, key client.ObjectKey, obj client.Object) error {
		if key.Namespace != "team-a" || key.Name != "my-relay-0-0" {
			return kerrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
		}
		pod := obj.(*corev1.Pod)
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner, Controller: &controller}}
		pod.Spec.HostNetwork = hostNetwork
		pod.Status = corev1.PodStatus{Phase: phase, PodIP: "127.0.0.1"}
		return nil
	}}
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	ss := newSamplers()
	ss.now = func() time.Time { return now }
	e := &external{read: read, samplers: ss}
	mg := &v1alpha1.RelayConfig{ObjectMeta: metav1.ObjectMeta{Name: "my-relay-0", Namespace: "team-a", UID: "uid"}}
	mg.Spec.ForProvider.Traffic = &v1alpha1.TrafficSource{Pod: "my-relay-0-0", Port: int32(p)}

	sample := func(packets, bytes int64, at time.Time) *v1alpha1.TrafficSample {
		return &v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: packets, ForwardedBytes: bytes, SampledAt: metav1.NewTime(at)}
	}
	first := now
	steps := []struct {
		reason  string
		after   time.Duration
		set     func()
		scrapes int32
		want    *v1alpha1.TrafficSample
	}{
		{reason: "The first reconcile samples.", scrapes: 1, want: sample(128, 16384, first)},
		{reason: "Within a minute nothing is read.", after: 30 * time.Second, set: func() { packets.Store(500) }, scrapes: 1, want: sample(128, 16384, first)},
		{reason: "After a minute the new count is read, but not recorded: a relay counting on is recorded every recordEvery.", after: 30 * time.Second, scrapes: 2, want: sample(128, 16384, first)},
		{reason: "Once the recorded sample is recordEvery old, the new count is recorded.", after: recordEvery - time.Minute, scrapes: 3, want: sample(508, 16384, first.Add(recordEvery))},
		{reason: "The same counts a minute later change nothing, not even the time.", after: time.Minute, scrapes: 4, want: sample(508, 16384, first.Add(recordEvery))},
		{reason: "A pod of the same name not controlled by the replica's StatefulSet is not read.", after: time.Minute, set: func() { controller = false; packets.Store(900) }, scrapes: 4, want: sample(508, 16384, first.Add(recordEvery))},
		{reason: "Nor one controlled by another StatefulSet.", after: time.Minute, set: func() { controller, owner = true, "other" }, scrapes: 4, want: sample(508, 16384, first.Add(recordEvery))},
		{reason: "Nor the replica's pod on its node's network: its address is the node's.", after: time.Minute, set: func() { owner, hostNetwork = "my-relay-0", true }, scrapes: 4, want: sample(508, 16384, first.Add(recordEvery))},
		{reason: "A pod that is not running keeps the last sample.", after: time.Minute, set: func() { hostNetwork = false; phase = corev1.PodPending }, scrapes: 4, want: sample(508, 16384, first.Add(recordEvery))},
		{reason: "Sampling turned off clears the sample.", after: time.Minute, set: func() { mg.Spec.ForProvider.Traffic = nil }, scrapes: 4},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		if s.set != nil {
			s.set()
		}
		e.sampleTraffic(t.Context(), mg)
		if got := scrapes.Load(); got != s.scrapes {
			t.Errorf("%s\nscrapes: %d, want %d", s.reason, got, s.scrapes)
		}
		if diff := cmp.Diff(s.want, mg.Status.AtProvider.Traffic); diff != "" {
			t.Errorf("%s\nstatus.atProvider.traffic -want +got:\n%s", s.reason, diff)
		}
	}
	if got := ss.pollInterval("uid", 10*time.Minute); got != 10*time.Minute {
		t.Errorf("a RelayConfig no longer sampling is polled every %s, want 10m", got)
	}
}

// TestScrapeReachesOnlyThePod: the pod's metrics endpoint is the tenant's
// to program. A redirect (to another namespace's pod, the metadata
// address) is not followed, a proxy in the environment is not used, and a
// huge answer is read line by line up to a bound, keeping only the relay
// counters.
func TestScrapeReachesOnlyThePod(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte(relayMetrics))
	}))
	t.Cleanup(other.Close)
	// A proxy that would answer for any address.
	t.Setenv("HTTP_PROXY", other.URL)
	t.Setenv("http_proxy", other.URL)
	addrOf := func(srv *httptest.Server) netip.AddrPort {
		return netip.MustParseAddrPort(srv.Listener.Addr().String())
	}
	cases := map[string]struct {
		reason  string
		handler http.HandlerFunc
		want    *v1alpha1.TrafficSample
		wantErr string
	}{
		"Redirect": {
			reason: "A redirect to another address is not followed: no sample, and nothing sent there.",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/metrics", http.StatusFound)
			},
			wantErr: "HTTP 302",
		},
		"Relay": {
			reason:  "The pod's own counters are read, not through the proxy.",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(relayMetrics)) },
			want:    &v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: 128, ForwardedBytes: 16384},
		},
		"Huge": {
			reason: "An answer of many megabytes is read only up to its bound: counters past it are not seen.",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				for range 100_000 {
					_, _ = w.Write([]byte("tailscaled_other_total{x=\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"} 1\n"))
				}
				_, _ = w.Write([]byte(relayMetrics))
			},
			wantErr: "no " + metricForwardedPackets,
		},
		"LongLine": {
			reason: "A line longer than the bound ends the read with an error.",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(strings.Repeat("x", 2*maxLine) + "\n" + relayMetrics))
			},
			wantErr: "token too long",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := httptest.NewServer(tc.handler)
			t.Cleanup(pod.Close)
			before := elsewhere.Load()
			got, err := scrapeTraffic(t.Context(), addrOf(pod))
			if elsewhere.Load() != before {
				t.Errorf("%s\na request reached another address", tc.reason)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nerror %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, &got); diff != "" {
				t.Errorf("%s\nsample -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWorthRecording(t *testing.T) {
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	last := &v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: 100, ForwardedBytes: 9000, SampledAt: metav1.NewTime(at)}
	idle := &v1alpha1.TrafficSample{SampledAt: metav1.NewTime(at)}
	cases := map[string]struct {
		reason string
		last   *v1alpha1.TrafficSample
		sample v1alpha1.TrafficSample
		after  time.Duration
		want   bool
	}{
		"First":     {reason: "The first sample is recorded.", sample: v1alpha1.TrafficSample{}, want: true},
		"Unchanged": {reason: "The same counts are not recorded, however old.", last: last, sample: *last, after: time.Hour, want: false},
		"CountingOn": {
			reason: "A relay counting on is not recorded within recordEvery.",
			last:   last, sample: v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: 200, ForwardedBytes: 18000}, after: time.Minute, want: false,
		},
		"CountingOnLater": {
			reason: "After recordEvery it is.",
			last:   last, sample: v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: 200, ForwardedBytes: 18000}, after: recordEvery, want: true,
		},
		"StartsRelaying": {
			reason: "An idle relay that starts relaying is recorded at once: the PeerRelay shows it carries traffic.",
			last:   idle, sample: v1alpha1.TrafficSample{Sessions: 1, ForwardedPackets: 3, ForwardedBytes: 300}, after: time.Second, want: true,
		},
		"SessionsEnd": {
			reason: "A relay whose sessions end is recorded at once.",
			last:   last, sample: v1alpha1.TrafficSample{Sessions: 0, ForwardedPackets: 100, ForwardedBytes: 9000}, after: time.Second, want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := worthRecording(tc.last, tc.sample, at.Add(tc.after)); got != tc.want {
				t.Errorf("%s\nworthRecording: %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
