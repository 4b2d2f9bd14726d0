package relayconfig

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// staleAfter is how many intervals a RelayConfig's entry in a schedule
// outlives its last run: past it, the RelayConfig is taken to be gone (its
// finalizer removed by hand, say, so it never reached Delete).
const staleAfter = 10

// schedule is when each RelayConfig last had one kind of periodic job (a
// probe, a traffic sample) and how often it is due. Each job kind keeps
// one; the poll hook asks each (pollInterval), so a RelayConfig is
// reconciled as often as its most frequent job.
type schedule struct {
	mu   sync.Mutex
	now  func() time.Time
	jobs map[types.UID]scheduled
}

// scheduled is a RelayConfig's last run of a job: when, for what (key: a
// probe's endpoints and device), and how often it is due. pending says a
// new key waits for the soonest a job may run again.
type scheduled struct {
	at      time.Time
	key     string
	every   time.Duration
	pending bool
	// waiting: the job never ran, it waits for what it needs.
	waiting bool
}

// newSchedule returns an empty schedule on the clock now.
func newSchedule(now func() time.Time) *schedule {
	return &schedule{now: now, jobs: map[types.UID]scheduled{}}
}

// due says whether the job is to run now for the RelayConfig, for key,
// every interval, and if so records that it runs: it never ran, its
// interval has passed, or its key changed and soonest has passed since
// the last run (a change the RelayConfig's namespace can make at will,
// such as a device ID in its state Secret, runs the job at most that
// often).
func (s *schedule) due(uid types.UID, key string, every, soonest time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	last, ok := s.jobs[uid]
	switch {
	case !ok || last.waiting || now.Sub(last.at) >= last.every:
	case last.key == key:
		return false
	case now.Sub(last.at) < soonest:
		last.pending = true
		s.jobs[uid] = last
		return false
	}
	s.jobs[uid] = scheduled{at: now, key: key, every: every}
	maps.DeleteFunc(s.jobs, func(_ types.UID, j scheduled) bool { return now.Sub(j.at) > staleAfter*j.every })
	return true
}

// wait records that the RelayConfig's job waits for what it needs (a
// device, an endpoint): it is polled every interval meanwhile.
func (s *schedule) wait(uid types.UID, every time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[uid] = scheduled{at: s.now(), every: every, waiting: true}
}

// has says whether the RelayConfig is on the schedule.
func (s *schedule) has(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.jobs[uid]
	return ok
}

// forget drops a RelayConfig that is gone or no longer has the job.
func (s *schedule) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, uid)
}

// pollInterval polls a RelayConfig on the schedule as often as its job is
// due, or after the soonest a pending change may run (managed.
// PollIntervalHook).
func (s *schedule) pollInterval(uid types.UID, poll, soonest time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[uid]
	switch {
	case ok && j.pending:
		return min(poll, soonest)
	case ok:
		return min(poll, j.every)
	}
	return poll
}
