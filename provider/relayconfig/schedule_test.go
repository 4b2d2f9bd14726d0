package relayconfig

import (
	"testing"
	"time"
)

// TestScheduleDue: a job is due again after its interval, or when what it
// runs for (a probe's endpoints and device) changed, no sooner than the
// soonest it may run again (the state Secret's device ID is the tenant's
// to rewrite); a job that waited for what it needs runs at once; and the
// RelayConfig is polled as often.
func TestScheduleDue(t *testing.T) {
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	const every, soonest = time.Minute, 15 * time.Second
	cases := map[string]struct {
		reason string
		waited bool // the last entry is a wait, not a run
		after  time.Duration
		key    string
		want   bool
		polled time.Duration // the poll interval after, of 10m
	}{
		"Within":        {reason: "Nothing changed within the interval: not due.", after: 59 * time.Second, key: "a", polled: every},
		"After":         {reason: "The interval passed: due.", after: every, key: "a", want: true, polled: every},
		"NewKey":        {reason: "A new key runs once soonest has passed since the last run.", after: soonest, key: "b", want: true, polled: every},
		"NewKeyTooSoon": {reason: "A new key within soonest of the last run waits, and the RelayConfig is polled after soonest.", after: time.Second, key: "b", polled: soonest},
		"Waited":        {reason: "A job that waited (no device yet) runs as soon as it can, not soonest later.", waited: true, after: time.Second, key: "b", want: true, polled: every},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := at
			s := newSchedule(func() time.Time { return now })
			if tc.waited {
				s.wait("uid", every)
			} else if !s.due("uid", "a", every, soonest) {
				t.Fatal("a job never run is not due")
			}
			now = now.Add(tc.after)
			if got := s.due("uid", tc.key, every, soonest); got != tc.want {
				t.Errorf("%s\ndue: %v, want %v", tc.reason, got, tc.want)
			}
			if got := s.pollInterval("uid", 10*time.Minute, soonest); got != tc.polled {
				t.Errorf("%s\npolled every %s, want %s", tc.reason, got, tc.polled)
			}
		})
	}
	s := newSchedule(time.Now)
	if got := s.pollInterval("uid", 10*time.Minute, soonest); got != 10*time.Minute {
		t.Errorf("a RelayConfig not on the schedule is polled every %s, want the provider's 10m", got)
	}
	s.due("uid", "a", every, soonest)
	s.forget("uid")
	if got := s.pollInterval("uid", 10*time.Minute, soonest); got != 10*time.Minute {
		t.Errorf("a forgotten RelayConfig is polled every %s, want 10m", got)
	}
}

// TestScheduleStaleEntriesGo: a RelayConfig that never reaches Delete (its
// finalizer removed by hand) does not stay in a schedule: once ten of its
// intervals pass without a run, the next run of another drops it.
func TestScheduleStaleEntriesGo(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	s := newSchedule(func() time.Time { return now })
	s.due("gone", "", time.Minute, 0)
	now = now.Add(5 * time.Minute)
	s.due("live", "", time.Minute, 0)
	if !s.has("gone") {
		t.Fatal("an entry five intervals old was dropped")
	}
	now = now.Add(6 * time.Minute)
	s.due("live", "", time.Minute, 0)
	if s.has("gone") {
		t.Error("the schedule keeps a RelayConfig not run for eleven intervals")
	}
	if !s.has("live") {
		t.Error("the schedule dropped the RelayConfig just run")
	}
}
