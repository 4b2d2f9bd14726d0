package relayconfig

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func request(ns string, i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("r-%d", i)}}
}

// fairAt is a fairReconciler on a global bucket of rps and burst, whose
// clock the test sets.
func fairAt(now *time.Time, rps, burst int) *fairReconciler {
	r := newFairReconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), &workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(rps), burst)})
	r.now = func() time.Time { return *now }
	return r
}

// TestFairReconcilerBurst: a namespace that asks for 50 reconciles at
// once, with a global bucket of 10 a second and 10 at once, gets its first
// 10 at once and waits for the rest in its own bucket; each woken early by
// an event waits out the rest of its time. A reconcile of another
// namespace that comes next waits at most one global token (0.1 s), where
// crossplane-runtime's single bucket has it wait behind all 40 (4 s).
func TestFairReconcilerBurst(t *testing.T) {
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	fair := fairAt(&now, 10, 10)
	ran := 0
	for i := range 50 {
		if fair.wait(request("busy", i)) == 0 {
			ran++
		}
	}
	for i := 10; i < 50; i++ {
		if d := fair.wait(request("busy", i)); d == 0 {
			t.Errorf("busy r-%d, woken by an event before its time, ran", i)
		}
	}
	if ran != 10 {
		t.Errorf("%d reconciles ran at once, want the global burst, 10", ran)
	}
	if d := fair.wait(request("quiet", 0)); d > 100*time.Millisecond {
		t.Errorf("the quiet namespace's reconcile waits %v beside 50 of another namespace, want at most one global token (0.1 s)", d)
	}

	// crossplane-runtime's one bucket, on the real clock.
	single := ratelimiter.NewReconciler("single", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), &workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(10, 10)})
	for i := range 50 {
		_, _ = single.Reconcile(t.Context(), request("busy", i))
	}
	res, _ := single.Reconcile(t.Context(), request("quiet", 0))
	if res.RequeueAfter < 3500*time.Millisecond {
		t.Errorf("with one global bucket the quiet reconcile waits %v; the comparison no longer shows what the fair one saves", res.RequeueAfter)
	}
}

// TestFairReconcilerSustained: for two minutes a namespace asks for twice
// the global rate (20 new reconciles a second against 10), while another
// asks for one every two seconds. Requests are requeued after the waits
// they are given, as the controller does. The quiet namespace's reconciles
// each wait at most a few global tokens; with crossplane-runtime's one
// bucket their wait grows by a second every second.
func TestFairReconcilerSustained(t *testing.T) {
	start := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	const period = 2 * time.Minute
	run := func(wait func(now time.Time, req reconcile.Request) time.Duration) (worst, last time.Duration) {
		type due struct {
			at      time.Time
			req     reconcile.Request
			arrived time.Time
		}
		var queue []due
		push := func(d due) {
			i, _ := slices.BinarySearchFunc(queue, d.at, func(e due, at time.Time) int { return e.at.Compare(at) })
			queue = slices.Insert(queue, i, d)
		}
		for i := 0; time.Duration(i)*50*time.Millisecond < period; i++ {
			at := start.Add(time.Duration(i) * 50 * time.Millisecond)
			push(due{at: at, req: request("busy", i), arrived: at})
			if i%40 == 0 {
				push(due{at: at, req: request("quiet", i), arrived: at})
			}
		}
		for len(queue) > 0 && queue[0].at.Before(start.Add(period)) {
			d := queue[0]
			queue = queue[1:]
			if w := wait(d.at, d.req); w > 0 {
				push(due{at: d.at.Add(w), req: d.req, arrived: d.arrived})
				continue
			}
			if d.req.Namespace == "quiet" {
				last = d.at.Sub(d.arrived)
				worst = max(worst, last)
			}
		}
		return worst, last
	}

	var now time.Time
	fair := fairAt(&now, 10, 100)
	worst, _ := run(func(at time.Time, req reconcile.Request) time.Duration { now = at; return fair.wait(req) })
	if worst > 300*time.Millisecond {
		t.Errorf("beside a namespace asking for twice the rate, the quiet namespace's reconciles waited up to %v, want at most a few global tokens", worst)
	}

	global := rate.NewLimiter(10, 100)
	waited := map[reconcile.Request]bool{}
	_, last := run(func(at time.Time, req reconcile.Request) time.Duration {
		if waited[req] { // crossplane-runtime lets a requeued request through
			delete(waited, req)
			return 0
		}
		d := global.ReserveN(at, 1).DelayFrom(at)
		waited[req] = d > 0
		return d
	})
	if last < 30*time.Second {
		t.Errorf("with one bucket the quiet namespace's last reconcile waited %v; the comparison no longer shows the growing wait", last)
	}
	t.Logf("quiet namespace beside one asking for twice the rate for %v: fair, worst wait %v; one bucket, last wait %v", period, worst, last)
}

// TestFairReconcilerShare: a namespace alone has the whole rate and burst;
// among several the burst is split equally and the namespaces with a
// backlog split 90% of the rate; one whose bucket has refilled leaves the
// share at the next sweep.
func TestFairReconcilerShare(t *testing.T) {
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	r := fairAt(&now, 10, 100)
	part := func(ns string) string {
		return fmt.Sprintf("%v a second, %d at once", r.namespaces[ns].Limit(), r.namespaces[ns].Burst())
	}
	_ = r.wait(request("a", 0))
	if got := part("a"); got != "10 a second, 100 at once" {
		t.Errorf("a namespace alone has %s, want the global bucket's 10 and 100", got)
	}
	for i := range 4 {
		_ = r.wait(request(fmt.Sprintf("ns-%d", i), 0))
	}
	if got := part("a"); got != "9 a second, 20 at once" {
		t.Errorf("one of five namespaces, none with a backlog, has %s; want 90%% of the rate and a fifth of the burst", got)
	}
	backlogged := func(ns string) (waiting []reconcile.Request) {
		for i := 1; i <= 21; i++ {
			if r.wait(request(ns, i)) > 0 && r.waited[request(ns, i)].stage == waitedNamespace {
				waiting = append(waiting, request(ns, i))
			}
		}
		return waiting
	}
	waiting := append(backlogged("a"), backlogged("ns-0")...)
	if got := part("ns-1"); got != "4.5 a second, 20 at once" {
		t.Errorf("with two of five namespaces backlogged, each has %s; want 4.5 (90%% of 10, halved) and 20", got)
	}
	now = now.Add(10 * time.Second)
	for _, req := range waiting {
		_ = r.wait(req) // its turn: out of the backlog
	}
	now = now.Add(10 * time.Second)
	_ = r.wait(request("a", 99))
	if len(r.namespaces) != 1 || part("a") != "10 a second, 100 at once" {
		t.Errorf("after a sweep: %d buckets, a has %s; want only a's, with the whole rate", len(r.namespaces), part("a"))
	}
}
