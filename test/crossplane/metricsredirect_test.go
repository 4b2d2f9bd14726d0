package crossplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/test/harness"
)

// bystanderNamespace holds a pod of a team that has nothing to do with the
// hostile tenant.
const bystanderNamespace = "team-bystander"

// redirectingMetrics plays a tenant whose relay image answers the provider's
// traffic sampling (GET /metrics on the replica's pod) with a redirect to a
// pod of another namespace. The provider reads the tenant's pod (its
// request is in that pod's log) and follows nothing: the other pod's log
// shows no request, and no sample is recorded. Two layers refuse it (no
// redirect followed; only the pod's address dialled): this fails only
// without both. A redirect to the cloud's
// metadata address is the same redirect; nothing answers there in this
// test, so TestScrapeReachesOnlyThePod is where that one is seen.
func (s *system) redirectingMetrics(ctx context.Context, t *testing.T, ownTailnet, ownTag string) {
	const pkg = "github.com/peerrelay/peerrelay/test/harness/tenantmetrics"
	if out, err := s.Kubectl(t, "create", "namespace", bystanderNamespace); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() {
		_, _ = s.Kubectl(t, "delete", "namespace", bystanderNamespace, "--wait=false")
	})
	bystander := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: bystanderNamespace, Name: "metrics"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "metrics", Image: s.Registry.PushProgram(t, "team-bystander/metrics", "v1", pkg),
		}}},
	}
	if err := s.Admin.Create(ctx, bystander); err != nil {
		t.Fatal(err)
	}
	var target string
	harness.Eventually(t, 2*time.Minute, "the bystander pod running", func(ctx context.Context) error {
		if err := s.Admin.Get(ctx, types.NamespacedName{Namespace: bystanderNamespace, Name: "metrics"}, bystander); err != nil {
			return err
		}
		if bystander.Status.Phase != corev1.PodRunning || bystander.Status.PodIP == "" {
			return fmt.Errorf("phase %s, IP %q", bystander.Status.Phase, bystander.Status.PodIP)
		}
		target = "http://" + bystander.Status.PodIP + ":9002/metrics"
		return nil
	})

	image := s.Registry.PushProgram(t, "team-evil/relay", "redirect", pkg, "-redirect", target)
	s.applyPeerRelay(t, evilNamespace, "redirect", fmt.Sprintf("replicas: 1\ntailnet: %s\ntags: [%q]\nmetrics: {enable: true}\npod: {image: %q}", ownTailnet, ownTag, image))
	harness.Eventually(t, 4*time.Minute, "the provider sampling the tenant's pod", func(context.Context) error {
		if log := s.node.Logs(evilNamespace, "redirect-0-0"); !strings.Contains(log, "request GET /metrics from") {
			return fmt.Errorf("no request for /metrics in the tenant pod's log:\n%s", log)
		}
		return nil
	})
	// A followed redirect would reach the bystander within the scrape, and
	// a sample would be in the status the same reconcile writes: watch
	// both for a while after the tenant's pod was asked.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if log := s.node.Logs(bystanderNamespace, "metrics"); strings.Contains(log, "request") {
			t.Fatalf("the tenant's redirect reached a pod in namespace %s:\n%s", bystanderNamespace, log)
		}
		rc, err := s.Get(ctx, relayAPI, "RelayConfig", evilNamespace, "redirect-0")
		if err != nil {
			t.Fatal(err)
		}
		if traffic, ok, _ := unstructured.NestedMap(rc.Object, "status", "atProvider", "traffic"); ok {
			t.Fatalf("a sample was recorded from the redirecting pod: %v", traffic)
		}
	}
	if out, err := s.Kubectl(t, "-n", evilNamespace, "delete", "peerrelay", "redirect", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
