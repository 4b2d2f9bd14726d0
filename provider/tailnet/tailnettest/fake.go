// Package tailnettest holds a contract fake of the Tailscale API.
package tailnettest

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FakeAPI is a contract fake of the Tailscale API: it implements exactly the
// calls the provider makes (OAuth token, create and revoke a key, get and
// delete a device) and
// records every request so tests assert method, path, body and auth. The
// real API cannot be reached from here.
type FakeAPI struct {
	*httptest.Server

	mu       sync.Mutex
	Calls    []Call
	Devices  map[string]Device // existing devices by ID
	FailNext int               // answer the next N device deletions with 500
	keys     int
	revoked  []string
	fault    Fault
	faulted  int
}

// Fault is how the fake answers every request while it is set: the
// failures of the real API a client must survive.
type Fault struct {
	// Status answers with this HTTP status (429, 500, 503, ...), each
	// body with a request ID of its own, as the real API's errors carry.
	Status int
	// RetryAfter, with Status 429, is the Retry-After header's seconds.
	RetryAfter int
	// Delay answers this much later (or not at all, when the client gives
	// up first: a timeout).
	Delay time.Duration
	// Words, with Status, is the error's message in place of the usual
	// one: its %s gets a random token and a timestamp each time, words no
	// scrubbing of request IDs knows.
	Words string
}

// Device is what the fake knows of a device.
type Device struct {
	Hostname string
	Tags     []string
	Created  time.Time
}

// Call is one recorded request.
type Call struct {
	Method, Path, Auth string
	Body               map[string]any
	// At is when the request arrived: a test that finds a call it did
	// not expect says when it came.
	At time.Time
}

// StartFakeAPI starts the fake; the OAuth client is id/secret.
func StartFakeAPI(t testing.TB) *FakeAPI {
	f := &FakeAPI{Devices: map[string]Device{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// StartFakeAPITLS starts the fake over HTTPS only, on l with tlsConfig's
// certificate: the API as a pod reaches it, verified against a CA.
func StartFakeAPITLS(t testing.TB, l net.Listener, tlsConfig *tls.Config) *FakeAPI {
	return StartFakeAPIOn(t, l, tlsConfig)
}

// StartFakeAPIOn starts the fake on l: over HTTPS with tlsConfig, or plain
// HTTP when it is nil.
func StartFakeAPIOn(t testing.TB, l net.Listener, tlsConfig *tls.Config) *FakeAPI {
	f := &FakeAPI{Devices: map[string]Device{}}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	_ = f.Listener.Close()
	f.Listener = l
	if tlsConfig == nil {
		f.Start()
	} else {
		f.TLS = tlsConfig
		f.StartTLS()
	}
	t.Cleanup(f.Close)
	return f
}

func (f *FakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	c := Call{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), At: time.Now()}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(raw, &c.Body)
	} else if len(raw) > 0 {
		c.Body = map[string]any{"form": string(raw)}
	}
	f.mu.Lock()
	f.Calls = append(f.Calls, c)
	fault := f.fault
	if fault != (Fault{}) {
		f.faulted++
	}
	f.mu.Unlock()
	if fault.Delay > 0 {
		select {
		case <-time.After(fault.Delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if fault.Status != 0 {
		if fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(fault.RetryAfter))
		}
		if fault.Words != "" {
			w.WriteHeader(fault.Status)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": fmt.Sprintf(fault.Words, rand.Text()+" "+time.Now().Format(time.RFC3339Nano))})
			return
		}
		f.fail(w, fault.Status)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v2/oauth/token":
		id, secret, ok := r.BasicAuth()
		if !ok || id != "client-id" || secret != "client-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"tok-123","token_type":"Bearer","expires_in":3600}`))
	case r.Header.Get("Authorization") != "Bearer tok-123":
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"unauthorized"}`))
	case r.Method == http.MethodPost && r.URL.Path == "/api/v2/tailnet/-/keys":
		f.keys++
		id := "k" + strconv.Itoa(f.keys)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "key": "tskey-auth-" + id + "-CONTRACTSECRET",
			"expires": time.Now().Add(expiry(c.Body)).UTC().Format(time.RFC3339),
		})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/api/v2/tailnet/-/keys/"):
		f.revoked = append(f.revoked, strings.TrimPrefix(r.URL.Path, "/api/v2/tailnet/-/keys/"))
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v2/device/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/v2/device/")
		d, ok := f.Devices[id]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"not found"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "nodeId": "node-" + id, "hostname": d.Hostname, "name": d.Hostname + ".tail0000.ts.net",
			"tags": d.Tags, "created": d.Created.UTC().Format(time.RFC3339),
		})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/api/v2/device/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/v2/device/")
		if f.FailNext > 0 {
			f.FailNext--
			f.fail(w, http.StatusInternalServerError)
			return
		}
		if _, ok := f.Devices[id]; !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"not found"}`))
			return
		}
		delete(f.Devices, id)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"no such endpoint in the contract"}`))
	}
}

// expiry is the key life a key request asks for (expirySeconds), or the
// API's default of 90 days.
func expiry(body map[string]any) time.Duration {
	if s, ok := body["expirySeconds"].(float64); ok && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 90 * 24 * time.Hour
}

// fail answers status with a request ID of its own every time, as the
// real API's errors carry: what a condition message must not.
func (f *FakeAPI) fail(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"message":"%s, request id: %d"}`, strings.ToLower(http.StatusText(status)), requestIDs.Add(1)+time.Now().UnixNano())
}

var requestIDs atomic.Int64

// SetFault makes every request answer as x says, until it is set again;
// Fault{} answers normally.
func (f *FakeAPI) SetFault(x Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = x
}

// Faulted returns how many requests met a fault.
func (f *FakeAPI) Faulted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.faulted
}

// SetFailNext makes the next n device deletions answer 500.
func (f *FakeAPI) SetFailNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.FailNext = n
}

// HasDevice reports whether the device exists.
func (f *FakeAPI) HasDevice(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.Devices[id]
	return ok
}

// DeviceIDs returns the IDs of the devices that exist, sorted.
func (f *FakeAPI) DeviceIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.Devices))
}

// AddDevice makes a device exist.
func (f *FakeAPI) AddDevice(id string, d Device) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Devices[id] = d
}

// Revoked returns the IDs of the keys revoked so far.
func (f *FakeAPI) Revoked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.revoked...)
}

// Recorded returns the calls so far.
func (f *FakeAPI) Recorded() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.Calls...)
}
