// Package cloud is the world outside the cluster the provider talks to:
// moto_server for AWS (EC2 and ELBv2) with fixtures for addresses,
// subnets and load balancers, a DNS server on loopback whose answers the
// test sets, and a proxy that fails requests on demand.
package cloud

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/peerrelay/peerrelay/test/harness"
)

// motoStartTimeout bounds moto_server's start.
const motoStartTimeout = 60 * time.Second

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
	host, _, _ := net.SplitHostPort(harness.LoopbackAddress())
	return StartMotoOn(t, host)
}

// StartMotoOn is StartMoto on one of the host's addresses: the pod
// network's services address, for a provider that runs in a pod.
func StartMotoOn(t testing.TB, host string) *Moto {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	harness.Need(t, err == nil, "moto_server not on PATH: pip install 'moto[server]==5.2.1', or apt install python3-moto")
	_, port, _ := net.SplitHostPort(harness.LoopbackAddress()) // a port no other server of this process holds
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
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("---- moto_server's requests (last 8 KiB) ----\n%s", harness.Tail(string(log), 8192))
		}
	})
	m := &Moto{Endpoint: "http://" + net.JoinHostPort(host, port), stop: stop}
	deadline := time.Now().Add(motoStartTimeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(m.Endpoint + "/moto-api/")
		if err == nil {
			_ = resp.Body.Close()
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(logf.Name())
	t.Fatalf("moto_server did not answer on %s within %s:\n%s", m.Endpoint, motoStartTimeout, log)
	return nil
}
