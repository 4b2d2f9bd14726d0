package resolve

import (
	"context"
	"errors"
	"net/netip"
	"slices"
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
	got, err := a.LoadBalancerAddresses(ctx, dnsName, "relay-0", "team-a")
	if err != nil {
		t.Fatalf("resolving %s through moto: %v", dnsName, err)
	}
	if len(got) != 0 {
		// Should moto start reporting addresses, they must be the EIPs.
		t.Logf("moto now reports addresses %v", got)
	}
	if _, err := a.LoadBalancerAddresses(ctx, dnsName, "no-such-lb", "team-a"); err == nil || !strings.Contains(err.Error(), "no-such-lb") && !strings.Contains(err.Error(), "LoadBalancerNotFound") {
		t.Errorf("a missing load balancer: want an error, got %v", err)
	}
}

// TestAWSLoadBalancerOwnership: a load balancer named in the spec is looked
// up with the platform's credentials, so it is used only when its tags say
// it is the RelayConfig's namespace's; one the tenant's own Service's
// hostname names needs no tag (the AWS Load Balancer Controller made it).
func TestAWSLoadBalancerOwnership(t *testing.T) {
	m := cloud.StartMoto(t)
	ctx := context.Background()
	e, l := m.AWSClients()
	a := AWSResolver{ELB: l, EC2: e}
	lbs := map[string]map[string]string{
		"set-aside": cloud.NamespaceTags("team-a"),
		"composed":  {"peerrelay.io/relay": "team-a/edge", "Name": "edge-0"},
		"theirs":    cloud.NamespaceTags("team-b"),
		"lookalike": {"peerrelay.io/relay": "team-ab/edge"},
		"untagged":  nil,
	}
	hosts := map[string]string{}
	for name, tags := range lbs {
		hosts[name] = m.CreateNLB(t, name, tags)
	}
	cases := map[string]struct {
		reason   string
		hostname string
		name     string
		owned    bool
	}{
		"NamespaceTag": {reason: "A load balancer the platform team set aside for team-a.", name: "set-aside", owned: true},
		"RelayTag":     {reason: "A load balancer the function composed for a PeerRelay in team-a.", name: "composed", owned: true},
		"OtherTeam":    {reason: "team-b's load balancer, named in team-a's spec.", name: "theirs"},
		"Lookalike":    {reason: "team-ab's relay tag does not start with team-a/.", name: "lookalike"},
		"Untagged":     {reason: "An untagged load balancer is no namespace's.", name: "untagged"},
		"OtherTeamWithItsHostname": {
			reason:   "Naming it beside its hostname does not skip the check.",
			hostname: "theirs", name: "theirs",
		},
		"ServiceHostname": {
			reason:   "Found by the tenant's own Service's hostname, not a name in the spec: no tag needed.",
			hostname: "untagged", owned: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host := ""
			if tc.hostname != "" {
				host = hosts[tc.hostname]
			}
			_, err := a.LoadBalancerAddresses(ctx, host, tc.name, "team-a")
			if tc.owned {
				if err != nil {
					t.Errorf("%s\nwant it used, got %v", tc.reason, err)
				}
				return
			}
			if !errors.Is(err, ErrNotOwned) {
				t.Fatalf("%s\nwant ErrNotOwned, got %v", tc.reason, err)
			}
			msg := err.Error()
			for _, want := range []string{"spec.forProvider.aws.loadBalancerName", "peerrelay.io/namespace=team-a", "peerrelay.io/relay=team-a/"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s\nthe error %q does not name %s", tc.reason, msg, want)
				}
			}
			// Nothing of another team's load balancer but the name the
			// tenant wrote.
			for _, leak := range []string{"arn:", hosts[tc.name], "team-b", "team-ab"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%s\nthe error %q tells %q", tc.reason, msg, leak)
				}
			}
			if _, err := a.PlacedLoadBalancerAddresses(ctx, tc.name, "", "team-a"); !errors.Is(err, ErrNotOwned) {
				t.Errorf("%s\nPlacedLoadBalancerAddresses: want ErrNotOwned, got %v", tc.reason, err)
			}
		})
	}
}

// TestPlacedLoadBalancerFallbackOwnership: a placed load balancer whose
// per-zone addresses AWS leaves out (moto does) answers on its Elastic
// IP's address, but only on an Elastic IP tagged for the namespace: the
// allocation comes from the spec, which the tenant writes, and another
// team's address must not be advertised as the tenant's.
func TestPlacedLoadBalancerFallbackOwnership(t *testing.T) {
	m := cloud.StartMoto(t)
	ctx := context.Background()
	e, l := m.AWSClients()
	a := AWSResolver{ELB: l, EC2: e}
	n := m.CreateAWSNetwork(t, "team-a")
	m.CreatePlacedNLB(t, "mine", n.PublicSubnet, n.FreeAllocations[0], cloud.NamespaceTags("team-a"))
	for name, tc := range map[string]struct {
		alloc string
		want  bool
	}{
		"Owned":   {alloc: n.FreeAllocations[0], want: true},
		"Foreign": {alloc: n.ForeignAllocation},
	} {
		t.Run(name, func(t *testing.T) {
			addrs, err := a.PlacedLoadBalancerAddresses(ctx, "mine", tc.alloc, "team-a")
			if err != nil {
				t.Fatal(err)
			}
			ip := m.PublicIP(t, tc.alloc)
			got := slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.String() == ip })
			if got != tc.want {
				t.Errorf("addresses %v include %s (%s): %v, want %v", addrs, ip, tc.alloc, got, tc.want)
			}
		})
	}
}
