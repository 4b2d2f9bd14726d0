package tailnet

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ErrRetryAfter is a request not sent: the Tailscale API answered 429 Too
// Many Requests and asked, with Retry-After, for none until later. The
// message stays the same for the whole wait, so a condition carrying it
// is written once.
var ErrRetryAfter = errors.New("not sent: the Tailscale API answered 429 Too Many Requests and asked for no requests before its Retry-After")

// maxRetryAfter caps the wait a Retry-After can ask for.
const maxRetryAfter = 10 * time.Minute

// retryAfter is an http.RoundTripper that, after a 429 with Retry-After,
// sends nothing until that time: every reconcile in between fails at once
// with ErrRetryAfter, and the managed reconciler backs off, instead of
// each spending a request the API refuses. One per OAuth client, as the
// API limits per client.
type retryAfter struct {
	next http.RoundTripper
	now  func() time.Time

	mu    sync.Mutex
	until time.Time
}

func (r *retryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	until := r.until
	r.mu.Unlock()
	if r.now().Before(until) {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even when it fails
		}
		return nil, ErrRetryAfter
	}
	rsp, err := r.next.RoundTrip(req)
	if err != nil || rsp.StatusCode != http.StatusTooManyRequests {
		return rsp, err
	}
	if d, ok := parseRetryAfter(rsp.Header.Get("Retry-After"), r.now()); ok {
		r.mu.Lock()
		r.until = r.now().Add(min(d, maxRetryAfter))
		r.mu.Unlock()
	}
	return rsp, nil
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
