package cloud

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// FaultProxy stands in front of a real server (moto) and, while told to,
// answers every request with an AWS-style error instead: 503 throttling or
// 500, each with a request ID of its own. It injects faults moto cannot produce by itself; the answers it does
// pass through are moto's own.
type FaultProxy struct {
	URL string

	mu     sync.Mutex
	status int // 0: pass through
	failed int
	// words is the error message, with %s for a token new every time:
	// words no scrubbing of request IDs knows.
	words string
}

// StartFaultProxy proxies to target until the test ends.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &FaultProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		status, words := p.status, p.words
		if status != 0 {
			p.failed++
		}
		id := fmt.Sprintf("fault-%d-%d", time.Now().UnixNano(), p.failed)
		p.mu.Unlock()
		msg := "injected by the test"
		if words != "" {
			msg = fmt.Sprintf(words, strconv.FormatInt(time.Now().UnixNano(), 36))
		}
		if status == 0 {
			rp.ServeHTTP(w, r)
			return
		}
		code := "InternalFailure"
		if status == http.StatusServiceUnavailable {
			code = "Throttling"
		}
		// A new request ID every time, as AWS gives: what a condition
		// message must not carry.
		w.Header().Set("Content-Type", "text/xml")
		w.Header().Set("X-Amzn-Requestid", id)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Receiver</Type><Code>` + code + `</Code><Message>` + msg + `</Message></Error><RequestId>` + id + `</RequestId></ErrorResponse>`))
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Fail makes every request answer status (503: throttling; 500: internal
// error); 0 passes requests through again.
func (p *FaultProxy) Fail(status int) {
	p.FailWith(status, "")
}

// FailWith is Fail with an error message of words, %s in it replaced by a
// token new every time ("" for the fixed message).
func (p *FaultProxy) FailWith(status int, words string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.words = status, words
}

// Failed counts the requests answered with an injected fault.
func (p *FaultProxy) Failed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
