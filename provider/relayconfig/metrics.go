package relayconfig

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	resolveSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "peerrelay_resolve_duration_seconds",
		Help:    "Time to resolve a replica's public endpoints (DNS, AWS), by outcome (ok, error).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
	}, []string{"outcome"})
)

// Collectors are the provider's own metrics, to register once per process.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{tailnetCalls, keysMinted, devicesDeleted, resolveSeconds}
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
