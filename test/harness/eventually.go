package harness

import (
	"context"
	"testing"
	"time"
)

// attemptTimeout bounds one attempt: a call that waits for an answer that
// may never come (a LocalAPI disco ping, a silent DNS server) must not
// hang the test.
const attemptTimeout = 5 * time.Second

// Eventually calls f until it returns nil, every 100 ms, and fails the test
// with f's last error after timeout. Each attempt gets its own context,
// ended after 5 s.
func Eventually(t testing.TB, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
