package tailnet

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/provider/tailnet/tailnettest"
)

// TestContractRetryAfter: after a 429 with Retry-After, the client sends
// nothing until then, token requests included; each call in between fails
// at once with the same error.
func TestContractRetryAfter(t *testing.T) {
	f := tailnettest.StartFakeAPI(t)
	c, err := New(f.URL, "", "client-id", "client-secret")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.SetFault(tailnettest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 60})
	if _, _, _, err := c.CreateAuthKey(ctx, KeyRequest{Tags: []string{"tag:relay"}, Description: "r"}); err == nil || errors.Is(err, ErrRetryAfter) || f.Faulted() != 1 {
		t.Fatalf("the first call meets the 429: got %v", err)
	}
	f.SetFault(tailnettest.Fault{}) // the API would answer now; the client waits as asked
	sent := len(f.Recorded())
	var msgs []string
	for range 3 {
		_, err := c.Device(ctx, "n1")
		if !errors.Is(err, ErrRetryAfter) {
			t.Fatalf("a call within Retry-After: got %v, want ErrRetryAfter", err)
		}
		msgs = append(msgs, err.Error())
	}
	if n := len(f.Recorded()) - sent; n != 0 {
		t.Errorf("%d requests sent within Retry-After, want 0", n)
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Errorf("the error changes within one wait: %q", msgs)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"30":                            30 * time.Second,
		"0":                             0,
		"Sat, 05 Dec 2026 10:01:00 GMT": time.Minute,
		"Sat, 05 Dec 2026 09:59:00 GMT": 0,
	} {
		if got, ok := parseRetryAfter(v, now); !ok || got != want {
			t.Errorf("Retry-After %q: got %v, %v; want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "soon"} {
		if _, ok := parseRetryAfter(v, now); ok {
			t.Errorf("Retry-After %q: parsed, want refused", v)
		}
	}
}

// TestContractTimeout: an API that does not answer, the token endpoint
// included, fails a call after the client's timeout, not the minute the
// library gives it (and never, for a token request).
func TestContractTimeout(t *testing.T) {
	f := tailnettest.StartFakeAPI(t)
	c, err := newClient(f.URL, "", "client-id", "client-secret", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	f.SetFault(tailnettest.Fault{Delay: 5 * time.Second})
	start := time.Now()
	_, err = c.Device(context.Background(), "n1")
	if err == nil || !strings.Contains(err.Error(), "Client.Timeout exceeded") && !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("a silent token endpoint: got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the call took %v: the timeout did not hold", d)
	}
}
