package harness

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"
	"time"
)

// HostPort is the host:port of a server URL (a rest.Config's Host).
func HostPort(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Port() == "" {
		return "", fmt.Errorf("server address %q has no host:port", server)
	}
	return u.Host, nil
}

// ProxyTCP forwards every connection to listen on to target (TLS passes
// through) until the returned stop is called or the test ends: how a
// node's side of the test reaches a server the test runs on loopback.
func ProxyTCP(t testing.TB, listen, target string) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = in.Close() }()
				out, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer func() { _ = out.Close() }()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return func() { _ = l.Close() }
}
