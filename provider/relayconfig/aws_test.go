package relayconfig_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness/cloud"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// TestAWSResolutionAndOutage: a RelayConfig in AWS mode resolves an NLB
// that moto created, with credentials from a Secret; moto reports no
// per-zone addresses, so the provider falls back to DNS. Then AWS goes
// away: the lookup fails, the last good endpoints stay in the config, and
// Synced says why.
func TestAWSResolutionAndOutage(t *testing.T) {
	t.Parallel() // its outage is mostly waiting
	m := cloud.StartMoto(t)
	ctx := context.Background()
	host := m.CreateNLB(t, "relay-0", cloud.NamespaceTags("team-a")) // named in the spec: must be team-a's

	faults := cloud.StartFaultProxy(t, m.Endpoint)
	e := startWith(t, providertest.Options{ProviderConfig: v1alpha1.ProviderConfigSpec{
		AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsSecret, SecretRef: &v1alpha1.SecretRef{Name: "aws", Namespace: "team-a"}, Region: "us-east-1", Endpoint: faults.URL},
	}})
	e.dns.Set(host, "198.51.100.21", "198.51.100.20")
	must(t, e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "aws"},
		Data: map[string][]byte{"aws_access_key_id": []byte("testing"), "aws_secret_access_key": []byte("testing")}}))
	e.service(t, "relay-0", corev1.LoadBalancerIngress{Hostname: host})
	e.relayConfig(t, "relay-0", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.Resolution = v1alpha1.ResolutionAWS
		rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{LoadBalancerName: "relay-0"}
	})
	e.config(t, "relay-0-config", "the NLB's addresses", endpointsAre("198.51.100.20:41641", "198.51.100.21:41641"))
	e.waitFor(t, "relay-0", "Ready", func(rc *v1alpha1.RelayConfig) bool {
		return rc.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
	})

	// AWS throttles, then answers 500, then goes away altogether: each time
	// the last good endpoints stay and Synced says why.
	for _, fault := range []struct {
		name  string
		apply func()
		want  string
	}{
		// The SDK retries throttling and 5xx with backoff until the
		// resolve timeout (500 ms here) runs out.
		{"throttling", func() { faults.Fail(http.StatusServiceUnavailable) }, "DescribeLoadBalancers"},
		{"5xx", func() { faults.Fail(http.StatusInternalServerError) }, "DescribeLoadBalancers"},
		// Words no scrubbing knows: the condition changes on every
		// attempt, and the retries still follow the backoff.
		{"5xx-unknown-words", func() { faults.FailWith(http.StatusInternalServerError, "internal failure, trace %s") }, "DescribeLoadBalancers"},
		{"outage", func() { faults.Fail(0); m.Stop() }, "DescribeLoadBalancers"},
	} {
		failedBefore := faults.Failed()
		fault.apply()
		touch(t, e, "relay-0", fault.name)
		rc := e.waitFor(t, "relay-0", "Synced=False naming "+fault.want, func(rc *v1alpha1.RelayConfig) bool {
			c := rc.GetCondition(xpv2.TypeSynced)
			return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, fault.want)
		})
		if c := rc.GetCondition("EndpointsResolved"); c.Reason != "ResolveFailed" {
			t.Errorf("%s: EndpointsResolved: want ResolveFailed, got %+v", fault.name, c)
		}
		if strings.HasPrefix(fault.name, "5xx") {
			quietDuringOutage(t, e, faults, rc, fault.name == "5xx")
		}
		e.config(t, "relay-0-config", "the last good endpoints during "+fault.name, endpointsAre("198.51.100.20:41641", "198.51.100.21:41641"))
		if fault.name == "outage" {
			break
		}
		if faults.Failed() == failedBefore {
			t.Errorf("%s: no request met the injected fault", fault.name)
		}
		// AWS recovers before the next fault: Synced comes back.
		faults.Fail(0)
		touch(t, e, "relay-0", fault.name+"-recovered")
		e.waitFor(t, "relay-0", "Synced=True after "+fault.name, func(rc *v1alpha1.RelayConfig) bool {
			return rc.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue
		})
	}
	if faults.Failed() == 0 {
		t.Error("no request met an injected fault; the test proved nothing")
	}
}

// touch changes a Service annotation, as a cloud controller's sync does,
// so the provider looks again at once.
func touch(t *testing.T, e *env, name, value string) {
	t.Helper()
	svc := &corev1.Service{}
	must(t, e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, svc))
	svc.Annotations = map[string]string{"touched": value}
	must(t, e.c.Update(context.Background(), svc))
}

// quietDuringOutage: while AWS keeps failing, the retries follow the
// reconciler's backoff, not a requeue per status write, whatever the
// error's words. With stableWords each failure says the same (no request
// ID: every answer carries a new one), so the RelayConfig is not written
// again either.
func quietDuringOutage(t *testing.T, e *env, faults *cloud.FaultProxy, failed *v1alpha1.RelayConfig, stableWords bool) {
	t.Helper()
	before := faults.Failed()
	time.Sleep(15 * time.Second)
	rc := e.get(t, "relay-0")
	n := faults.Failed() - before
	t.Logf("requests that met the fault in 15 s of outage: %d", n)
	if n == 0 || n > 40 {
		t.Errorf("%d requests met the fault in 15 s: want some (the provider retries) and at most 40 (it backs off)", n)
	}
	if stableWords && rc.ResourceVersion != failed.ResourceVersion {
		t.Errorf("the RelayConfig was written during the outage: Synced %q, then %q", failed.GetCondition(xpv2.TypeSynced).Message, rc.GetCondition(xpv2.TypeSynced).Message)
	}
	if strings.Contains(rc.GetCondition(xpv2.TypeSynced).Message, "fault-") {
		t.Errorf("Synced carries a request ID: %q", rc.GetCondition(xpv2.TypeSynced).Message)
	}
}
