package kubelet

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"
	"time"
)

func url2hostport(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Port() == "" {
		return "", fmt.Errorf("API server address %q has no host:port", s)
	}
	return u.Host, nil
}

// proxyTCP forwards every connection to listen on to target (TLS passes
// through): the kubernetes Service, as kube-proxy would.
func proxyTCP(t testing.TB, listen, target string) func() {
	t.Helper()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
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
