package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/peerrelay/peerrelay/provider/awsowner"
)

// ErrNoLoadBalancer says AWS has no load balancer of that name (yet).
var ErrNoLoadBalancer = errors.New("no such load balancer")

// ErrNotOwned says a load balancer named in spec.forProvider.aws is not
// the RelayConfig's namespace's.
var ErrNotOwned = errors.New("not this namespace's load balancer")

// ELBv2API is the part of the ELBv2 client we call.
type ELBv2API interface {
	DescribeLoadBalancers(ctx context.Context, in *elbv2.DescribeLoadBalancersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancersOutput, error)
	DescribeTags(ctx context.Context, in *elbv2.DescribeTagsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTagsOutput, error)
}

// EC2API is the part of the EC2 client we call.
type EC2API interface {
	DescribeAddresses(ctx context.Context, in *ec2.DescribeAddressesInput, opts ...func(*ec2.Options)) (*ec2.DescribeAddressesOutput, error)
}

// AWSResolver reads an NLB's per-zone addresses from the ELBv2 API: unlike
// DNS, which leaves out unhealthy zones, it lists every zone's address.
type AWSResolver struct {
	ELB ELBv2API
	EC2 EC2API
}

// LoadBalancerAddresses finds the load balancer by name, or by the name its
// hostname starts with, and returns its public addresses, sorted. A name
// given is the tenant's to write, and the lookup uses the platform's
// credentials: the load balancer must carry namespace's tags (else
// ErrNotOwned). One its hostname names is the tenant's own Service's, whose
// hostname the load balancer controller wrote.
func (a AWSResolver) LoadBalancerAddresses(ctx context.Context, hostname, name, namespace string) ([]netip.Addr, error) {
	named := name != ""
	if !named {
		name = LoadBalancerNameFromHostname(hostname)
	}
	if name == "" {
		return nil, fmt.Errorf("cannot tell the load balancer's name from %q: set spec.forProvider.aws.loadBalancerName", hostname)
	}
	out, err := a.ELB.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	var nf *elbtypes.LoadBalancerNotFoundException
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("%w: %s", ErrNoLoadBalancer, name)
	}
	if err != nil {
		return nil, err
	}
	for _, lb := range out.LoadBalancers {
		if hostname != "" && lb.DNSName != nil && !strings.EqualFold(*lb.DNSName, hostname) {
			continue
		}
		if named {
			if err := a.owned(ctx, lb, namespace); err != nil {
				return nil, err
			}
		}
		addrs, allocs := Addresses(lb)
		if len(allocs) > 0 {
			pub, err := a.publicIPs(ctx, allocs, "")
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, pub...)
		}
		return sortAddrs(addrs), nil
	}
	return nil, fmt.Errorf("no load balancer %q with DNS name %q", name, hostname)
}

// PlacedLoadBalancerAddresses returns the addresses of a load balancer
// placed with a known Elastic IP: the per-zone addresses the API reports,
// else that Elastic IP's own address, which is what it answers on.
func (a AWSResolver) PlacedLoadBalancerAddresses(ctx context.Context, name, allocationID, namespace string) ([]netip.Addr, error) {
	addrs, err := a.LoadBalancerAddresses(ctx, "", name, namespace)
	if err != nil || len(addrs) > 0 || allocationID == "" {
		return addrs, err
	}
	// The spec's allocation, which the tenant writes: its address only
	// when it is tagged for the namespace.
	return a.publicIPs(ctx, []string{allocationID}, namespace)
}

// owned returns ErrNotOwned, naming only the field and the tags wanted,
// unless lb carries namespace's tags: nothing else of another team's load
// balancer goes into the tenant's status.
func (a AWSResolver) owned(ctx context.Context, lb elbtypes.LoadBalancer, namespace string) error {
	arn := aws.ToString(lb.LoadBalancerArn)
	out, err := a.ELB.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil {
		return fmt.Errorf("describing the tags of load balancer %s: %w", aws.ToString(lb.LoadBalancerName), err)
	}
	tags := map[string]string{}
	for _, d := range out.TagDescriptions {
		if aws.ToString(d.ResourceArn) != arn {
			continue
		}
		for _, t := range d.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	if !awsowner.Owned(namespace, tags) {
		return fmt.Errorf("spec.forProvider.aws.loadBalancerName %q: %w: it carries %s", aws.ToString(lb.LoadBalancerName), ErrNotOwned, awsowner.Wanted(namespace))
	}
	return nil
}

// Addresses extracts a load balancer's public IPv4 addresses, and the
// Elastic IP allocations whose address the response left out.
func Addresses(lb elbtypes.LoadBalancer) ([]netip.Addr, []string) {
	var addrs []netip.Addr
	var allocs []string
	for _, az := range lb.AvailabilityZones {
		for _, la := range az.LoadBalancerAddresses {
			if la.IpAddress != nil {
				if ip, err := netip.ParseAddr(*la.IpAddress); err == nil {
					addrs = append(addrs, ip)
					continue
				}
			}
			if la.AllocationId != nil {
				allocs = append(allocs, *la.AllocationId)
			}
		}
	}
	return addrs, allocs
}

// publicIPs returns the allocations' public addresses; with namespace set,
// only those of allocations tagged for it.
func (a AWSResolver) publicIPs(ctx context.Context, allocs []string, namespace string) ([]netip.Addr, error) {
	if a.EC2 == nil {
		return nil, nil
	}
	out, err := a.EC2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{AllocationIds: allocs})
	if err != nil {
		return nil, fmt.Errorf("describing Elastic IPs %v: %w", allocs, err)
	}
	var addrs []netip.Addr
	for _, ad := range out.Addresses {
		if namespace != "" && !awsowner.Owned(namespace, awsowner.EC2Tags(ad.Tags)) {
			continue
		}
		if ad.PublicIp != nil {
			if ip, err := netip.ParseAddr(*ad.PublicIp); err == nil {
				addrs = append(addrs, ip)
			}
		}
	}
	return addrs, nil
}

// LoadBalancerNameFromHostname returns the load balancer name an ELB
// hostname starts with: "k8s-ns-svc-0123abcd-0123456789abcdef.elb.us-east-1.amazonaws.com"
// names load balancer "k8s-ns-svc-0123abcd".
func LoadBalancerNameFromHostname(h string) string {
	if !IsELBHostname(h) {
		return ""
	}
	label, _, _ := strings.Cut(h, ".")
	i := strings.LastIndex(label, "-")
	if i <= 0 {
		return ""
	}
	return label[:i]
}

// RegionFromHostname returns the region an ELB hostname names.
func RegionFromHostname(h string) string {
	parts := strings.Split(strings.ToLower(h), ".")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "elb" {
			return parts[i+1]
		}
	}
	return ""
}
