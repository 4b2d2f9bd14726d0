package relayconfig

import (
	"context"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The provider's reconcile rate (--max-reconcile-rate), shared fairly
// between namespaces. crossplane-runtime's global bucket is one queue: a
// tenant that makes a few hundred reconciles at once (a PeerRelay of 100
// replicas coming up, 100 RelayConfigs written by hand) reserves its tokens
// ahead of everyone, and another namespace's load balancer change waited
// behind them (11.7 s beside 100 new RelayConfigs in
// TestCrossplane/Reachability); one that keeps asking for more than the
// rate makes everyone's wait grow without end.
//
// Here a reconcile first waits for a token of its namespace's bucket, then
// for a global one. A namespace alone has the whole rate and burst. Among
// several, the burst is split equally, and the namespaces with a backlog
// (requests waiting in their bucket) split 90% of the rate: the rest is
// headroom, so that a namespace without a backlog finds the global bucket
// keeping up, not owing tokens to the busy ones. A busy namespace's backlog
// waits in its own bucket.

// headroom is the part of the global rate left to namespaces without a
// backlog while others have one.
const headroom = 0.1

// fairReconciler limits reconciles per namespace, then globally.
type fairReconciler struct {
	inner  reconcile.Reconciler
	global *rate.Limiter
	now    func() time.Time

	mu sync.Mutex
	// namespaces holds the bucket of each namespace that has asked since
	// it was last full.
	namespaces map[string]*rate.Limiter
	// backlog counts each namespace's requests waiting in its bucket.
	backlog map[string]int
	// waited is the stage each delayed request waits at and until when:
	// its requeue passes that stage (its token is spent) and goes on, and
	// an event that brings it back sooner does not let it jump the queue.
	waited    map[reconcile.Request]waiting
	lastSweep time.Time
}

type waiting struct {
	stage stage
	until time.Time
}

type stage int

const (
	waitedNamespace stage = iota + 1
	waitedGlobal
)

// sweepEvery is how often full buckets are dropped and the rate shared
// again between the namespaces left.
const sweepEvery = time.Second

// newFairReconciler shares global, crossplane-runtime's bucket (or its
// default, 10 a second and 100 at once, if global is not a bucket).
func newFairReconciler(inner reconcile.Reconciler, global ratelimiter.RateLimiter) *fairReconciler {
	g := rate.NewLimiter(10, 100)
	if b, ok := global.(*ratelimiter.BucketRateLimiter); ok {
		g = b.Limiter
	}
	return &fairReconciler{
		inner: inner, global: g, now: time.Now,
		namespaces: map[string]*rate.Limiter{}, backlog: map[string]int{}, waited: map[reconcile.Request]waiting{},
	}
}

func (r *fairReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if d := r.wait(req); d > 0 {
		return reconcile.Result{RequeueAfter: d}, nil
	}
	return r.inner.Reconcile(ctx, req)
}

// wait says how long req waits before it runs: a new request for its
// namespace's token, then for a global one; a requeued request only for
// the stages it has not passed, and one back before its time (an event)
// for the rest of its wait.
func (r *fairReconciler) wait(req reconcile.Request) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.sweep(now)
	w := r.waited[req]
	if now.Before(w.until) {
		return w.until.Sub(now)
	}
	switch w.stage {
	case waitedGlobal:
		delete(r.waited, req)
		return 0
	case waitedNamespace:
		r.addBacklog(req.Namespace, -1, now)
	default:
		if d := r.namespace(req.Namespace, now).ReserveN(now, 1).DelayFrom(now); d > 0 {
			r.waited[req] = waiting{stage: waitedNamespace, until: now.Add(d)}
			r.addBacklog(req.Namespace, 1, now)
			return d
		}
	}
	if d := r.global.ReserveN(now, 1).DelayFrom(now); d > 0 {
		r.waited[req] = waiting{stage: waitedGlobal, until: now.Add(d)}
		return d
	}
	delete(r.waited, req)
	return 0
}

// namespace is ns's bucket; a namespace without one joins with a full
// bucket (it has asked for nothing lately).
func (r *fairReconciler) namespace(ns string, now time.Time) *rate.Limiter {
	l, ok := r.namespaces[ns]
	if !ok {
		r.namespaces[ns] = nil // counted in the share
		limit, burst := r.part()
		l = rate.NewLimiter(limit, burst)
		r.namespaces[ns] = l
		r.share(now)
	}
	return l
}

// addBacklog counts a request into or out of ns's backlog, sharing the rate
// again when ns starts or stops having one.
func (r *fairReconciler) addBacklog(ns string, n int, now time.Time) {
	before := r.backlog[ns]
	if r.backlog[ns] += n; r.backlog[ns] <= 0 {
		delete(r.backlog, ns)
	}
	if (before > 0) != (r.backlog[ns] > 0) {
		r.share(now)
	}
}

// part is each namespace's part of the global rate and burst.
func (r *fairReconciler) part() (rate.Limit, int) {
	n := len(r.namespaces)
	if n <= 1 {
		return r.global.Limit(), r.global.Burst()
	}
	return r.global.Limit() * (1 - headroom) / rate.Limit(max(1, len(r.backlog))), max(1, r.global.Burst()/n)
}

// share gives every namespace with a bucket its part.
func (r *fairReconciler) share(now time.Time) {
	limit, burst := r.part()
	for _, l := range r.namespaces {
		l.SetLimitAt(now, limit)
		l.SetBurstAt(now, burst)
	}
}

// sweep drops, every sweepEvery, the buckets that have refilled (their
// namespaces have asked for nothing lately) and shares the rate again.
func (r *fairReconciler) sweep(now time.Time) {
	if now.Sub(r.lastSweep) < sweepEvery {
		return
	}
	r.lastSweep = now
	before := len(r.namespaces)
	for ns, l := range r.namespaces {
		if r.backlog[ns] == 0 && l.TokensAt(now) >= float64(l.Burst()) {
			delete(r.namespaces, ns)
		}
	}
	if len(r.namespaces) != before {
		r.share(now)
	}
}
