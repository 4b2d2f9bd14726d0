package relayconfig

import (
	"context"
	"k8s.io/apimachinery/pkg/types"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// The provider's own metrics, beside crossplane-runtime's managed resource
// metrics, on its metrics endpoint (provider.Metrics registers them): what
// it asks of the Tailscale API and how that went, the keys it minted, the
// devices it removed, and how long resolving a replica's endpoints takes.
var (
	tailnetCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerrelay_tailscale_api_calls_total",
		Help: "Tailscale API calls by call (create_key, revoke_key, get_device, delete_device) and outcome (ok, not_found, error).",
	}, []string{"call", "outcome"})
	keysMinted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "peerrelay_auth_keys_minted_total",
		Help: "Auth keys minted for relay replicas.",
	})
	devicesDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "peerrelay_devices_deleted_total",
		Help: "Relay devices removed from the tailnet (or found already gone) when their replica went.",
	})
	probes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerrelay_probes_total",
		Help: "Reachability probes of a replica's advertised endpoints (spec.probe), by outcome (answered, partly_answered, no_answer, failed).",
	}, []string{"outcome"})
	replicaReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "peerrelay_replica_reachable",
		Help: "Whether the replica's advertised endpoints answered its last probe: 1 yes, 0 no, -1 the probe could not tell.",
	}, []string{"namespace", "relayconfig"})
	trafficSamples = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerrelay_traffic_samples_total",
		Help: "Reads of a replica's relay counters from its pod (spec.forProvider.traffic), by outcome (changed, unchanged, failed).",
	}, []string{"outcome"})
	resolveSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "peerrelay_resolve_duration_seconds",
		Help:    "Time to resolve a replica's public endpoints (DNS, AWS), by outcome (ok, error).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
	}, []string{"outcome"})
)

// Collectors are the provider's own metrics, to register once per process.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{tailnetCalls, keysMinted, devicesDeleted, probes, replicaReachable, trafficSamples, resolveSeconds}
}

// Every probe and sample outcome is exported from the start, at zero: a
// dashboard or an alert on a rate sees the series before the first one.
func init() {
	for _, o := range []string{"answered", "partly_answered", "no_answer", "failed"} {
		probes.WithLabelValues(o)
	}
	for _, o := range []string{sampleChanged, sampleUnchanged, sampleHeld, sampleFailed} {
		trafficSamples.WithLabelValues(o)
	}
	// The Tailscale API calls too: an alert that a call's errors are not
	// answered by successes (PeerRelayKeyMintFailing) sees the first
	// success as an increase.
	for _, c := range []string{"create_key", "revoke_key", "get_device", "delete_device"} {
		for _, o := range []string{"ok", "not_found", "error"} {
			tailnetCalls.WithLabelValues(c, o)
		}
	}
}

// Traffic sample outcomes.
const (
	sampleChanged   = "changed"
	sampleUnchanged = "unchanged"
	// sampleHeld: changed counters not recorded yet (worthRecording).
	sampleHeld   = "held"
	sampleFailed = "failed"
)

func observeSample(outcome string) { trafficSamples.WithLabelValues(outcome).Inc() }

// observeProbe records a replica's probe by the Reachable condition it
// gave.
func observeProbe(rc types.NamespacedName, c xpv2.Condition) {
	o, v := "failed", -1.0
	switch c.Reason {
	case v1alpha1.ReasonAnswered:
		o, v = "answered", 1
	case v1alpha1.ReasonPartlyAnswered:
		o, v = "partly_answered", 1
	case v1alpha1.ReasonNoAnswer:
		o, v = "no_answer", 0
	}
	probes.WithLabelValues(o).Inc()
	replicaReachable.WithLabelValues(rc.Namespace, rc.Name).Set(v)
}

// forgetProbes drops a replica that is no longer probed from the gauge.
func forgetProbes(namespace, name string) {
	replicaReachable.DeleteLabelValues(namespace, name)
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// observeResolve records one resolution that started at start.
func observeResolve(start time.Time, err error) {
	resolveSeconds.WithLabelValues(outcome(err)).Observe(time.Since(start).Seconds())
}

// countedAPI counts each Tailscale API call by its outcome.
type countedAPI struct{ tailnet.API }

func (c countedAPI) CreateAuthKey(ctx context.Context, req tailnet.KeyRequest) (string, string, time.Time, error) {
	id, key, expires, err := c.API.CreateAuthKey(ctx, req)
	tailnetCalls.WithLabelValues("create_key", outcome(err)).Inc()
	if err == nil {
		keysMinted.Inc()
	}
	return id, key, expires, err
}

func (c countedAPI) RevokeKey(ctx context.Context, id string) error {
	err := c.API.RevokeKey(ctx, id)
	tailnetCalls.WithLabelValues("revoke_key", outcome(err)).Inc()
	return err
}

func (c countedAPI) Device(ctx context.Context, id string) (*tailnet.Device, error) {
	d, err := c.API.Device(ctx, id)
	o := outcome(err)
	if err == nil && d == nil {
		o = "not_found"
	}
	tailnetCalls.WithLabelValues("get_device", o).Inc()
	return d, err
}

func (c countedAPI) DeleteDevice(ctx context.Context, id string) error {
	err := c.API.DeleteDevice(ctx, id)
	tailnetCalls.WithLabelValues("delete_device", outcome(err)).Inc()
	if err == nil {
		devicesDeleted.Inc()
	}
	return err
}
