package relayconfig

import (
	"context"
	"slices"
	"sync"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/types"
)

// Probes run off the reconcile path, on workers of their own: a probe
// waits up to probeTimeout on a silent endpoint (and a prober's join up
// to 30 s), which on the reconcile workers every tenant shares would let
// one namespace's silent endpoints hold everyone's reconciles. Observe
// queues a probe when one is due and reads the last result; a finished
// probe asks for a reconcile of its RelayConfig.
const (
	probeWorkers = 4
	// probesPerNamespace bounds the workers one namespace's probes hold
	// at once: the others are always free for the other namespaces.
	probesPerNamespace = 2
)

// probeJob is one probe of a replica's advertised endpoints.
type probeJob struct {
	rc  types.NamespacedName
	uid types.UID
	// key is what it probes: the result applies only while the replica
	// advertises the same endpoints on the same device.
	key string
	run func(context.Context) xpv2.Condition
}

// probeQueue holds the probes waiting, one queue per namespace served in
// turn, so a namespace with a hundred replicas waits behind its own
// probes, not another's. A RelayConfig has at most one probe queued or
// running.
type probeQueue struct {
	mu      sync.Mutex
	waiting map[string][]probeJob
	// order is the namespaces with probes waiting, next first.
	order   []string
	running map[string]int
	queued  map[types.UID]bool
	// next is the probe a RelayConfig asked for while its last one ran.
	next map[types.UID]probeJob
	// wake tells idle workers there may be work.
	wake chan struct{}
}

func newProbeQueue() *probeQueue {
	return &probeQueue{waiting: map[string][]probeJob{}, running: map[string]int{}, queued: map[types.UID]bool{}, next: map[types.UID]probeJob{}, wake: make(chan struct{}, probeWorkers)}
}

// push queues j. A RelayConfig has one probe queued at most: a newer one
// replaces it where it waits, or, while one runs, follows it.
func (q *probeQueue) push(j probeJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pushLocked(j)
}

// pushLocked is push with q.mu held.
func (q *probeQueue) pushLocked(j probeJob) {
	if q.queued[j.uid] {
		ns := j.rc.Namespace
		if i := slices.IndexFunc(q.waiting[ns], func(w probeJob) bool { return w.uid == j.uid }); i >= 0 {
			q.waiting[ns][i] = j
		} else {
			q.next[j.uid] = j
		}
		return
	}
	q.queued[j.uid] = true
	ns := j.rc.Namespace
	if len(q.waiting[ns]) == 0 {
		q.order = append(q.order, ns)
	}
	q.waiting[ns] = append(q.waiting[ns], j)
	q.signal()
}

// pop takes the next probe of the first namespace in turn that holds
// fewer than probesPerNamespace workers; that namespace goes to the back.
func (q *probeQueue) pop() (probeJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, ns := range q.order {
		if q.running[ns] >= probesPerNamespace {
			continue
		}
		j := q.waiting[ns][0]
		q.waiting[ns] = q.waiting[ns][1:]
		q.order = slices.Delete(q.order, i, i+1)
		if len(q.waiting[ns]) > 0 {
			q.order = append(q.order, ns)
		} else {
			delete(q.waiting, ns)
		}
		q.running[ns]++
		return j, true
	}
	return probeJob{}, false
}

// finish marks j done: its RelayConfig may queue again, and its
// namespace's worker is free.
func (q *probeQueue) finish(j probeJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.queued, j.uid)
	if q.running[j.rc.Namespace]--; q.running[j.rc.Namespace] <= 0 {
		delete(q.running, j.rc.Namespace)
	}
	q.signal()
	if next, ok := q.next[j.uid]; ok {
		// A change came while it ran: queued now, as any other probe.
		delete(q.next, j.uid)
		q.pushLocked(next)
	}
}

func (q *probeQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default: // enough wakes are pending for every worker
	}
}
