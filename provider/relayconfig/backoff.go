package relayconfig

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// backoff keeps each RelayConfig's retry backoff itself, where nothing
// else resets it. crossplane-runtime's global rate limiter
// (ratelimiter.Reconciler) defers a reconcile with RequeueAfter while the
// provider is busy, and controller-runtime forgets an item's failures on
// every RequeueAfter: once one tenant's many failing RelayConfigs keep
// the provider busy, every failing RelayConfig, any tenant's, would start
// again at 1 s after each deferral. Here a requeue (the managed
// reconciler's retry, after a failure or to look again soon) becomes a
// RequeueAfter from a per-RelayConfig exponential limiter, 1 s doubling to
// 60 s as controller-runtime's would, that only an ordinary finish resets.
type backoff struct {
	inner reconcile.Reconciler
	limit workqueue.TypedRateLimiter[reconcile.Request]
	log   logging.Logger
}

func newBackoff(inner reconcile.Reconciler, log logging.Logger) *backoff {
	return &backoff{inner: inner, log: log, limit: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute)}
}

func (b *backoff) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := b.inner.Reconcile(ctx, req)
	if err == nil && !res.Requeue { //nolint:staticcheck // the managed reconciler retries with Requeue
		b.limit.Forget(req)
		return res, nil
	}
	if err != nil {
		// controller-runtime would ignore the RequeueAfter beside an error.
		b.log.Info("Reconcile failed; retrying with backoff", "request", req.String(), "error", err)
	}
	return reconcile.Result{RequeueAfter: b.limit.When(req)}, nil
}
