package resolve

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
	"github.com/peerrelay/peerrelay/test/harness/cloud"
)

func svcWith(ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	s := &corev1.Service{}
	s.Status.LoadBalancer.Ingress = ingress
	return s
}

// fixedAWS answers LoadBalancerAddresses from a table, for a Resolver in
// namespace team-a.
type fixedAWS struct {
	addrs []netip.Addr
	err   error
}

func (f fixedAWS) LoadBalancerAddresses(_ context.Context, _, _, namespace string) ([]netip.Addr, error) {
	if namespace != "team-a" {
		return nil, fmt.Errorf("asked for namespace %q's load balancer, want the Resolver's (team-a)", namespace)
	}
	return f.addrs, f.err
}

func (f fixedAWS) PlacedLoadBalancerAddresses(ctx context.Context, name, _, namespace string) ([]netip.Addr, error) {
	return f.LoadBalancerAddresses(ctx, "", name, namespace)
}

func TestResolve(t *testing.T) {
	d := cloud.StartDNS(t)
	const nlb = "k8s-teama-myrelay0-0123abcd-0123456789abcdef.elb.us-east-1.amazonaws.com"
	d.Set(nlb, "203.0.113.30", "203.0.113.10", "203.0.113.20")
	d.Set("relay.example.test", "198.51.100.7")
	d.Set("dualstack.example.test", "2001:db8::20", "198.51.100.20", "2001:db8::10")
	d.Set("v6only.example.test", "2001:db8::30")

	type want struct {
		endpoints []string
		source    v1alpha1.EndpointSource
		err       string
	}
	cases := map[string]struct {
		reason string
		aws    LoadBalancerAddresser
		svc    *corev1.Service
		p      v1alpha1.RelayConfigParameters
		want   want
	}{
		"IngressIP": {
			reason: "Ingress IPs are used directly, with the spec port.",
			svc:    svcWith(corev1.LoadBalancerIngress{IP: "203.0.113.5"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{"203.0.113.5:41641"}, source: v1alpha1.SourceIngressIP},
		},
		"HostnameAllARecordsSorted": {
			reason: "An NLB hostname resolves to every zone's address, sorted.",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: nlb}),
			p:      v1alpha1.RelayConfigParameters{Port: 7000},
			want:   want{endpoints: []string{"203.0.113.10:7000", "203.0.113.20:7000", "203.0.113.30:7000"}, source: v1alpha1.SourceDNS},
		},
		"StaticAppended": {
			reason: "Static endpoints join the resolved ones.",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: "relay.example.test"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641, StaticEndpoints: []string{"192.0.2.1:9999", "198.51.100.7:41641"}},
			want:   want{endpoints: []string{"192.0.2.1:9999", "198.51.100.7:41641"}, source: v1alpha1.SourceDNS},
		},
		"HostnameDualStack": {
			reason: "A dual-stack load balancer's name has A and AAAA records: every address of both families is advertised.",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: "dualstack.example.test"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{"198.51.100.20:41641", "[2001:db8::10]:41641", "[2001:db8::20]:41641"}, source: v1alpha1.SourceDNS},
		},
		"HostnameIPv6Only": {
			reason: "A name with only AAAA records resolves (its A query answers no data, which is not a failure).",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: "v6only.example.test"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{"[2001:db8::30]:41641"}, source: v1alpha1.SourceDNS},
		},
		"IngressIPsBothFamilies": {
			reason: "A dual-stack Service's ingress has an IPv4 and an IPv6 address: both are advertised.",
			svc:    svcWith(corev1.LoadBalancerIngress{IP: "203.0.113.5"}, corev1.LoadBalancerIngress{IP: "2001:db8::5"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{"203.0.113.5:41641", "[2001:db8::5]:41641"}, source: v1alpha1.SourceIngressIP},
		},
		"StaticPortWins": {
			reason: "A static entry naming the load balancer's own address (a port forward to it) replaces the default-port endpoint for that address: its port wins.",
			svc:    svcWith(corev1.LoadBalancerIngress{IP: "203.0.113.5"}, corev1.LoadBalancerIngress{IP: "2001:db8::5"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641, StaticEndpoints: []string{"203.0.113.5:6969", "192.0.2.1:6969"}},
			want:   want{endpoints: []string{"192.0.2.1:6969", "203.0.113.5:6969", "[2001:db8::5]:41641"}, source: v1alpha1.SourceIngressIP},
		},
		"StaticOnly": {
			reason: "Without a Service the static endpoints are the answer.",
			p:      v1alpha1.RelayConfigParameters{Port: 41641, StaticEndpoints: []string{"192.0.2.1:41641"}},
			want:   want{endpoints: []string{"192.0.2.1:41641"}, source: v1alpha1.SourceStatic},
		},
		"Pending": {
			reason: "A Service without ingress is pending, not an error.",
			svc:    svcWith(),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{}},
		},
		"AWSAPIBeatsDNS": {
			reason: "With AWS credentials an ELB hostname is resolved through the API, which lists every zone.",
			aws:    fixedAWS{addrs: []netip.Addr{netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.1")}},
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: nlb}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{"198.51.100.1:41641", "198.51.100.2:41641"}, source: v1alpha1.SourceAWSAPI},
		},
		"AWSAPIEmptyFallsBackToDNS": {
			reason: "When the API lists no addresses, DNS answers.",
			aws:    fixedAWS{},
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: nlb}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{endpoints: []string{"203.0.113.10:41641", "203.0.113.20:41641", "203.0.113.30:41641"}, source: v1alpha1.SourceDNS},
		},
		"AWSNotOwnedRefusedInAuto": {
			reason: "Another team's load balancer named in the spec is an error even in Auto mode, not a silent fall back to DNS.",
			aws:    fixedAWS{err: fmt.Errorf("spec.forProvider.aws.loadBalancerName \"theirs\": %w", ErrNotOwned)},
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: nlb}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641, AWS: &v1alpha1.AWSResolution{LoadBalancerName: "theirs"}},
			want:   want{err: "spec.forProvider.aws.loadBalancerName \"theirs\": not this namespace's load balancer"},
		},
		"AWSModeWithoutCredentials": {
			reason: "Resolution AWS without credentials says which field to fix.",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: nlb}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641, Resolution: v1alpha1.ResolutionAWS},
			want:   want{err: "no AWS credentials"},
		},
		"UnknownHost": {
			reason: "A hostname without records is an error, so the caller keeps its last good set.",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: "gone.example.test"}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641},
			want:   want{err: "DNS lookup of gone.example.test"},
		},
		"IngressModeIgnoresHostname": {
			reason: "Resolution Ingress never looks names up.",
			svc:    svcWith(corev1.LoadBalancerIngress{Hostname: nlb}),
			p:      v1alpha1.RelayConfigParameters{Port: 41641, Resolution: v1alpha1.ResolutionIngress},
			want:   want{endpoints: []string{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Resolver{DNS: DNSResolver{Server: d.Addr}, AWS: tc.aws, Timeout: 2 * time.Second, Namespace: "team-a"}
			res, err := r.Resolve(context.Background(), tc.svc, tc.p)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("%s\nwant error containing %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nunexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.endpoints, endpoint.Strings(res.Endpoints)); diff != "" {
				t.Errorf("%s\nendpoints -want +got:\n%s", tc.reason, diff)
			}
			if res.Source != tc.want.source {
				t.Errorf("%s\nsource: want %q, got %q", tc.reason, tc.want.source, res.Source)
			}
		})
	}
}

func TestDNSFaults(t *testing.T) {
	d := cloud.StartDNS(t)
	d.Set("relay.example.test", "198.51.100.7")
	r := DNSResolver{Server: d.Addr}

	d.SetMode(cloud.DNSServFail)
	if _, err := r.LookupIP(context.Background(), "relay.example.test"); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Errorf("SERVFAIL: want an error naming SERVFAIL, got %v", err)
	}

	d.SetMode(cloud.DNSSilent)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.LookupIP(ctx, "relay.example.test"); err == nil {
		t.Error("a silent server: want a timeout error, got none")
	}

	d.SetMode(cloud.DNSAAAAServFail)
	if _, err := r.LookupIP(context.Background(), "relay.example.test"); err == nil || !strings.Contains(err.Error(), "SERVFAIL to AAAA") {
		t.Errorf("A answered, AAAA SERVFAIL: want an error (a caller keeps its last good set rather than drop a family), got %v", err)
	}

	d.SetMode(cloud.DNSAnswer)
	got, err := r.LookupIP(context.Background(), "relay.example.test")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("198.51.100.7") {
		t.Errorf("after recovery: want 198.51.100.7, got %v, %v", got, err)
	}
}

func TestELBHostnames(t *testing.T) {
	h := "k8s-teama-myrelay0-0123abcd-0123456789abcdef.elb.us-east-1.amazonaws.com"
	if got := LoadBalancerNameFromHostname(h); got != "k8s-teama-myrelay0-0123abcd" {
		t.Errorf("name: got %q", got)
	}
	if got := RegionFromHostname(h); got != "us-east-1" {
		t.Errorf("region: got %q", got)
	}
	if IsELBHostname("relay.example.com") || LoadBalancerNameFromHostname("relay.example.com") != "" {
		t.Error("relay.example.com is not an ELB name")
	}
}
