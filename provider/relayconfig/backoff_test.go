package relayconfig

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// failing is a managed reconciler whose RelayConfig keeps failing, or
// finishes once ok.
type failing struct{ ok bool }

func (f *failing) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	if f.ok {
		return reconcile.Result{RequeueAfter: time.Hour}, nil
	}
	return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // as the managed reconciler retries
}

// busyEveryOther is the global limiter of a provider kept busy by another
// tenant: every other reconcile is deferred.
type busyEveryOther struct{ n int }

func (b *busyEveryOther) When(string) time.Duration {
	b.n++
	if b.n%2 == 0 {
		return 100 * time.Millisecond
	}
	return 0
}
func (b *busyEveryOther) Forget(string)          {}
func (b *busyEveryOther) NumRequeues(string) int { return 0 }

// TestBackoffSurvivesGlobalDeferrals drives a failing RelayConfig's
// reconciles as controller-runtime's queue does (Forget on every
// RequeueAfter, AddRateLimited on Requeue) under a global rate limiter that
// defers every other reconcile. The retry delays keep doubling; without
// backoff each deferral resets them to 1 s. A finish resets them.
func TestBackoffSurvivesGlobalDeferrals(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "r-0"}}
	run := func(inner reconcile.Reconciler) []time.Duration {
		queue := ratelimiter.NewController() // the controller's own, as Setup's options give it
		r := ratelimiter.NewReconciler("relayconfig", inner, &busyEveryOther{})
		var delays []time.Duration
		for len(delays) < 5 {
			res, _ := r.Reconcile(context.Background(), req)
			switch {
			case res.RequeueAfter > 0:
				queue.Forget(req)
				if res.RequeueAfter != 100*time.Millisecond { // not the global deferral
					delays = append(delays, res.RequeueAfter)
				}
			case res.Requeue: //nolint:staticcheck // the managed reconciler's retry
				delays = append(delays, queue.When(req))
			}
		}
		return delays
	}
	inner := &failing{}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	if diff := cmp.Diff(want, run(newBackoff(inner, logging.NewNopLogger()))); diff != "" {
		t.Errorf("retry delays with backoff (-want +got):\n%s", diff)
	}
	if got := run(inner); cmp.Equal(want, got) {
		t.Errorf("without backoff the delays double too (%v): the test no longer shows the reset it guards against", got)
	}

	b := newBackoff(inner, logging.NewNopLogger())
	for range 3 {
		_, _ = b.Reconcile(context.Background(), req)
	}
	inner.ok = true
	_, _ = b.Reconcile(context.Background(), req)
	inner.ok = false
	if res, _ := b.Reconcile(context.Background(), req); res.RequeueAfter != time.Second {
		t.Errorf("after a finish the first retry is in %v, want 1s", res.RequeueAfter)
	}
}
