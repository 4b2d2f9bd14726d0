package kubelet

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs a readiness probe (HTTP GET or TCP connect) against the pod's
// address; a port may be named after one of the container's ports.
func probe(ip netip.Addr, c *corev1.Container, rp *corev1.Probe) bool {
	timeout := time.Duration(max(rp.TimeoutSeconds, 1)) * time.Second
	port := func(p intstr.IntOrString) string {
		if p.Type == intstr.String {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					return strconv.Itoa(int(cp.ContainerPort))
				}
			}
			return "0"
		}
		return strconv.Itoa(p.IntValue())
	}
	switch {
	case rp.HTTPGet != nil:
		h := rp.HTTPGet
		scheme := strings.ToLower(string(h.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		cl := &http.Client{Timeout: timeout, Transport: &http.Transport{
			// As the kubelet: an HTTPS probe does not verify the certificate.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's own behaviour
		}}
		resp, err := cl.Get(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(ip.String(), port(h.Port)), path.Clean("/"+h.Path)))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case rp.TCPSocket != nil:
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), port(rp.TCPSocket.Port)), timeout)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
	return true // exec and gRPC probes: not used by our pods
}
