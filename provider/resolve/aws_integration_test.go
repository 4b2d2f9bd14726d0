package resolve

import (
	"context"
	"strings"
	"testing"

	"github.com/peerrelay/peerrelay/test/harness/cloud"
)

// TestAWSAgainstMoto creates a VPC, subnets, Elastic IPs and an NLB in moto
// and resolves it through the real API path. moto reports no
// LoadBalancerAddresses, so the honest expectation is an empty answer (and
// the Resolver then falls back to DNS, covered in TestResolve).
func TestAWSAgainstMoto(t *testing.T) {
	m := cloud.StartMoto(t)
	ctx := context.Background()
	dnsName := m.CreateNLB(t, "relay-0", cloud.NamespaceTags("team-a"))
	e, l := m.AWSClients()
	a := AWSResolver{ELB: l, EC2: e}
	got, err := a.LoadBalancerAddresses(ctx, dnsName, "relay-0")
	if err != nil {
		t.Fatalf("resolving %s through moto: %v", dnsName, err)
	}
	if len(got) != 0 {
		// Should moto start reporting addresses, they must be the EIPs.
		t.Logf("moto now reports addresses %v", got)
	}
	if _, err := a.LoadBalancerAddresses(ctx, dnsName, "no-such-lb"); err == nil || !strings.Contains(err.Error(), "no-such-lb") && !strings.Contains(err.Error(), "LoadBalancerNotFound") {
		t.Errorf("a missing load balancer: want an error, got %v", err)
	}
}
