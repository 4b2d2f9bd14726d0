package harness

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

const (
	defaultStartTimeout = 60 * time.Second
	defaultStopTimeout  = 60 * time.Second
)

// Moto is a running moto_server.
type Moto struct {
	// Endpoint is the base URL to give aws-sdk-go-v2 as BaseEndpoint.
	Endpoint string

	stop func()
}

// Stop ends moto_server now (a fault test's AWS outage).
func (m *Moto) Stop() { m.stop() }

// StartMoto starts moto_server on a loopback address of its own and stops it when the
// test ends.
func StartMoto(t testing.TB) *Moto {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		Missing(t, "moto_server not on PATH: pip install 'moto[server]==5.2.1'")
	}
	host, port, _ := net.SplitHostPort(LoopbackAddress())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-H", host, "-p", port)
	cmd.Env = append(os.Environ(), "MOTO_ALLOW_NONEXISTENT_REGION=true")
	logf, err := os.CreateTemp(t.TempDir(), "moto-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("cannot start moto_server: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			_ = cmd.Wait()
			_ = logf.Close()
		})
	}
	t.Cleanup(stop)
	m := &Moto{Endpoint: "http://" + net.JoinHostPort(host, port), stop: stop}
	deadline := time.Now().Add(defaultStartTimeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(m.Endpoint + "/moto-api/")
		if err == nil {
			_ = resp.Body.Close()
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(logf.Name())
	t.Fatalf("moto_server did not answer on %s within %s:\n%s", m.Endpoint, defaultStartTimeout, log)
	return nil
}
