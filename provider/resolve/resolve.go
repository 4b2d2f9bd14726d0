// Package resolve finds a relay replica's public endpoints: its Service's
// load balancer ingress IPs, the A and AAAA records of an ingress hostname, or, for
// an AWS NLB, the per-zone addresses the ELBv2 API reports.
package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
)

// HostResolver looks up every address, IPv4 and IPv6, of a hostname.
type HostResolver interface {
	LookupIP(ctx context.Context, host string) ([]netip.Addr, error)
}

// LoadBalancerAddresser returns an AWS load balancer's public addresses. A
// load balancer found by a name given (not one its hostname starts with)
// must be namespace's, else the error is ErrNotOwned.
type LoadBalancerAddresser interface {
	LoadBalancerAddresses(ctx context.Context, hostname, name, namespace string) ([]netip.Addr, error)
	PlacedLoadBalancerAddresses(ctx context.Context, name, allocationID, namespace string) ([]netip.Addr, error)
}

// Resolver resolves endpoints. AWS is nil when no AWS credentials are
// configured.
type Resolver struct {
	DNS     HostResolver
	AWS     LoadBalancerAddresser
	Timeout time.Duration
	// Namespace is the RelayConfig's: a load balancer its spec names must
	// be tagged for it.
	Namespace string
}

// Result is one resolution.
type Result struct {
	// Endpoints, sorted and unique, static ones included.
	Endpoints []netip.AddrPort
	// Source of the resolved part.
	Source v1alpha1.EndpointSource
	// Hostname of the ingress, when it had one.
	Hostname string
}

// ErrNoAddress says the Service has no load balancer address yet.
var ErrNoAddress = errors.New("the Service has no load balancer address yet")

// Resolve returns the endpoints for a replica whose Service is svc (nil when
// the RelayConfig names none). An error means a lookup failed; the caller
// keeps its last good endpoints.
func (r *Resolver) Resolve(ctx context.Context, svc *corev1.Service, p v1alpha1.RelayConfigParameters) (Result, error) {
	var res Result
	static, err := endpoint.ParseStatic("spec.forProvider.staticEndpoints", p.StaticEndpoints)
	if err != nil {
		return res, err // before any lookup
	}
	addrs, err := r.resolveService(ctx, svc, p, &res)
	if err != nil {
		return res, err
	}
	return withStatic(res, addrs, uint16(p.Port), static), nil
}

// FromNode is the answer for a replica advertised on its node
// (spec.forProvider.node): the node's addresses, ExternalIP ones or, when
// internal, InternalIP ones, on port, with the static endpoints.
func FromNode(addrs []netip.Addr, internal bool, port uint16, static []string) (Result, error) {
	var res Result
	if len(addrs) > 0 {
		res.Source = v1alpha1.SourceNodeExternalIP
		if internal {
			res.Source = v1alpha1.SourceNodeInternalIP
		}
	}
	parsed, err := endpoint.ParseStatic("spec.forProvider.staticEndpoints", static)
	if err != nil {
		return res, err
	}
	return withStatic(res, addrs, port, parsed), nil
}

// withStatic puts addrs on port and merges the static endpoints in.
func withStatic(res Result, addrs []netip.Addr, port uint16, static []netip.AddrPort) Result {
	for _, a := range addrs {
		// A static entry for an address the load balancer provides says
		// which port reaches it (a port forward, a NAT): its port wins,
		// as in the Tailscale operator.
		if slices.ContainsFunc(static, func(s netip.AddrPort) bool { return s.Addr() == a }) {
			continue
		}
		res.Endpoints = append(res.Endpoints, netip.AddrPortFrom(a, port))
	}
	if len(addrs) == 0 && len(static) > 0 {
		res.Source = v1alpha1.SourceStatic
	}
	res.Endpoints = endpoint.Normalize(append(res.Endpoints, static...))
	return res
}

func (r *Resolver) resolveService(ctx context.Context, svc *corev1.Service, p v1alpha1.RelayConfigParameters, res *Result) ([]netip.Addr, error) {
	if svc == nil {
		if p.Resolution == v1alpha1.ResolutionAWS && p.AWS != nil && p.AWS.LoadBalancerName != "" {
			return r.loadBalancerByName(ctx, p.AWS.LoadBalancerName, p.AWS.AllocationID, res)
		}
		return nil, nil
	}
	var ips []netip.Addr
	var hosts []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			ips = append(ips, a.Unmap())
		}
		if in.Hostname != "" {
			hosts = append(hosts, in.Hostname)
		}
	}
	if len(hosts) > 0 {
		res.Hostname = hosts[0]
	}
	mode := p.Resolution
	if mode == "" {
		mode = v1alpha1.ResolutionAuto
	}
	if len(ips) > 0 && mode != v1alpha1.ResolutionDNS && mode != v1alpha1.ResolutionAWS {
		res.Source = v1alpha1.SourceIngressIP
		return ips, nil
	}
	if mode == v1alpha1.ResolutionIngress || len(hosts) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.TimeoutOrDefault())
	defer cancel()

	if mode == v1alpha1.ResolutionAWS || (mode == v1alpha1.ResolutionAuto && r.AWS != nil && IsELBHostname(hosts[0])) {
		addrs, err := r.awsAddresses(ctx, hosts[0], p, mode)
		if err != nil || len(addrs) > 0 {
			if err == nil {
				res.Source = v1alpha1.SourceAWSAPI
			}
			return addrs, err
		}
		// The API knew no addresses (or failed in Auto mode): DNS still
		// answers with every healthy zone's address.
	}
	var out []netip.Addr
	for _, h := range hosts {
		addrs, err := r.DNS.LookupIP(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("DNS lookup of %s: %w", h, err)
		}
		out = append(out, addrs...)
	}
	res.Source = v1alpha1.SourceDNS
	return out, nil
}

// awsAddresses asks the AWS API for the addresses of the load balancer
// behind host (or named in the spec). Nothing found, or a failure in Auto
// mode, is no addresses and no error: DNS answers instead.
func (r *Resolver) awsAddresses(ctx context.Context, host string, p v1alpha1.RelayConfigParameters, mode v1alpha1.Resolution) ([]netip.Addr, error) {
	if r.AWS == nil {
		return nil, errors.New("spec.forProvider.resolution is AWS but the ProviderConfig has no AWS credentials (spec.aws.source)")
	}
	name := ""
	if p.AWS != nil {
		name = p.AWS.LoadBalancerName
	}
	addrs, err := r.AWS.LoadBalancerAddresses(ctx, host, name, r.Namespace)
	switch {
	case err == nil:
		return addrs, nil
	case mode == v1alpha1.ResolutionAWS || errors.Is(err, ErrNotOwned):
		// Another team's load balancer named in the spec is refused in
		// every mode: falling back to DNS would hide that the spec is wrong.
		return nil, fmt.Errorf("AWS load balancer %s: %w", host, err)
	}
	return nil, nil
}

// loadBalancerByName resolves a load balancer no Service stands for (one
// composed as a managed resource). Until it exists there is no address,
// which is pending, not an error.
func (r *Resolver) loadBalancerByName(ctx context.Context, name, allocationID string, res *Result) ([]netip.Addr, error) {
	if r.AWS == nil {
		return nil, errors.New("spec.forProvider.resolution is AWS but the ProviderConfig has no AWS credentials (spec.aws.source)")
	}
	ctx, cancel := context.WithTimeout(ctx, r.TimeoutOrDefault())
	defer cancel()
	addrs, err := r.AWS.PlacedLoadBalancerAddresses(ctx, name, allocationID, r.Namespace)
	if errors.Is(err, ErrNoLoadBalancer) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("AWS load balancer %s: %w", name, err)
	}
	res.Source = v1alpha1.SourceAWSAPI
	return addrs, nil
}

// TimeoutOrDefault is how long one lookup may take.
func (r *Resolver) TimeoutOrDefault() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return v1alpha1.DefaultResolveTimeout * time.Second
}

// IsELBHostname reports whether h is an AWS Elastic Load Balancing name.
func IsELBHostname(h string) bool {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return strings.Contains(h, ".elb.") && (strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn"))
}
