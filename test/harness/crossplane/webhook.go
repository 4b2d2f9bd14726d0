package crossplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerrelay/peerrelay/test/harness"
)

// startWebhookService makes the Service Crossplane's webhook configuration
// names (crossplane-webhooks, as the Helm chart makes it) and returns the
// port Crossplane core is to serve its webhooks on.
//
// Core runs as a host process here, not as a pod behind a ClusterIP that
// kube-proxy would route, so the Service is an ExternalName one for
// 127.0.0.1: kube-apiserver resolves a webhook's Service to its ClusterIP,
// or for an ExternalName Service to that name, and still checks the
// server's certificate against <service>.<namespace>.svc, the name init
// signs it for. The port is any free one: core binds it on every address.
func startWebhookService(t testing.TB, c client.Client) int32 {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port) //nolint:gosec // a TCP port fits
	_ = l.Close()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: webhookServiceName, Namespace: CrossplaneNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "127.0.0.1",
			Ports:        []corev1.ServicePort{{Name: "webhooks", Port: port, Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := c.Create(context.Background(), svc); err != nil {
		t.Fatalf("creating the webhook Service: %v", err)
	}
	return port
}

// waitWebhook waits until core's webhook server answers TLS on port: until
// then a delete that a Usage guards would fail for want of it.
func waitWebhook(t testing.TB, core *harness.Process, port int32) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	harness.Eventually(t, 60*time.Second, "Crossplane's webhook server on "+addr, func(ctx context.Context) error {
		if core.Exited() {
			return fmt.Errorf("crossplane core exited:\n%s", harness.Tail(core.Log.String(), 3000))
		}
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // only whether it serves TLS yet
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}
