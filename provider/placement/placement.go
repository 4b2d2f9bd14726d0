// Package placement checks a replica's AWS placement (its subnet and Elastic
// IP) before the function places anything with it.
package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/awsowner"
)

// EC2API is the part of the EC2 client the placement check calls.
type EC2API interface {
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeRouteTables(ctx context.Context, in *ec2.DescribeRouteTablesInput, opts ...func(*ec2.Options)) (*ec2.DescribeRouteTablesOutput, error)
	DescribeAddresses(ctx context.Context, in *ec2.DescribeAddressesInput, opts ...func(*ec2.Options)) (*ec2.DescribeAddressesOutput, error)
	DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, opts ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error)
}

// Checker checks a replica's subnet and Elastic IP against AWS
// before anything is placed with them.
type Checker struct {
	EC2 EC2API
	// Namespace is the RelayConfig's own: an Elastic IP is used only when
	// its tags say it is this namespace's (awsowner.Owned).
	Namespace string
}

// Check looks at the subnet and, when given, the allocation. What is wrong
// with them comes back as Problems, each naming the ID; an error means AWS
// could not be asked, and nothing is known.
func (c Checker) Check(ctx context.Context, subnetID, allocationID string) (v1alpha1.AWSPlacementObservation, error) {
	obs := v1alpha1.AWSPlacementObservation{SubnetID: subnetID, AllocationID: allocationID, Checked: true}
	if subnetID != "" {
		if err := c.checkSubnet(ctx, &obs); err != nil {
			return obs, err
		}
	}
	if allocationID != "" {
		if err := c.checkAllocation(ctx, &obs); err != nil {
			return obs, err
		}
	}
	return obs, nil
}

func (c Checker) checkSubnet(ctx context.Context, obs *v1alpha1.AWSPlacementObservation) error {
	out, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{obs.SubnetID}})
	if notFound(err) || (err == nil && len(out.Subnets) == 0) {
		obs.Problems = append(obs.Problems, fmt.Sprintf("subnet %s does not exist in this region", obs.SubnetID))
		return nil
	}
	if err != nil {
		return fmt.Errorf("describing subnet %s: %w", obs.SubnetID, err)
	}
	sn := out.Subnets[0]
	obs.Zone, obs.VPCID = aws.ToString(sn.AvailabilityZone), aws.ToString(sn.VpcId)
	if aws.ToBool(sn.MapPublicIpOnLaunch) {
		return nil
	}
	public, err := c.routesToInternet(ctx, obs.SubnetID, obs.VPCID)
	if err != nil {
		return err
	}
	if !public {
		obs.Problems = append(obs.Problems, fmt.Sprintf("subnet %s is not public: its route table has no route to an internet gateway (and MapPublicIpOnLaunch is off), so an internet-facing load balancer cannot use it", obs.SubnetID))
	}
	return nil
}

// routesToInternet says whether the subnet's route table (its own, else
// the VPC's main one) routes to an internet gateway.
func (c Checker) routesToInternet(ctx context.Context, subnetID, vpcID string) (bool, error) {
	out, err := c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{
		{Name: aws.String("association.subnet-id"), Values: []string{subnetID}},
	}})
	if err != nil {
		return false, fmt.Errorf("describing the route table of subnet %s: %w", subnetID, err)
	}
	tables := out.RouteTables
	if len(tables) == 0 {
		out, err = c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{
			{Name: aws.String("vpc-id"), Values: []string{vpcID}},
			{Name: aws.String("association.main"), Values: []string{"true"}},
		}})
		if err != nil {
			return false, fmt.Errorf("describing the main route table of %s: %w", vpcID, err)
		}
		tables = out.RouteTables
	}
	for _, t := range tables {
		for _, r := range t.Routes {
			if strings.HasPrefix(aws.ToString(r.GatewayId), "igw-") {
				return true, nil
			}
		}
	}
	return false, nil
}

// checkAllocation checks the Elastic IP is the namespace's before anything
// else: the check runs with the platform's credentials, so another team's
// unassociated address would pass the rest, and what it is associated with
// is that team's to know.
func (c Checker) checkAllocation(ctx context.Context, obs *v1alpha1.AWSPlacementObservation) error {
	if c.Namespace == "" {
		return fmt.Errorf("cannot check Elastic IP %s: no namespace to check its ownership against", obs.AllocationID)
	}
	out, err := c.EC2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{obs.AllocationID}})
	if notFound(err) || (err == nil && len(out.Addresses) == 0) {
		obs.Problems = append(obs.Problems, fmt.Sprintf("Elastic IP %s does not exist in this region", obs.AllocationID))
		return nil
	}
	if err != nil {
		return fmt.Errorf("describing Elastic IP %s: %w", obs.AllocationID, err)
	}
	a := out.Addresses[0]
	if !awsowner.Owned(c.Namespace, awsowner.EC2Tags(a.Tags)) {
		obs.Problems = append(obs.Problems, fmt.Sprintf("Elastic IP %s is not this namespace's: it carries %s; the platform team tags Elastic IPs it sets aside for a namespace",
			obs.AllocationID, awsowner.Wanted(c.Namespace)))
		return nil
	}
	if a.Domain != "" && a.Domain != ec2types.DomainTypeVpc {
		obs.Problems = append(obs.Problems, fmt.Sprintf("Elastic IP %s is not a VPC address (domain %s)", obs.AllocationID, a.Domain))
	}
	switch {
	case aws.ToString(a.InstanceId) != "":
		obs.Problems = append(obs.Problems, fmt.Sprintf("Elastic IP %s is associated with instance %s: release it from there first", obs.AllocationID, aws.ToString(a.InstanceId)))
	case aws.ToString(a.NetworkInterfaceId) != "":
		eni := aws.ToString(a.NetworkInterfaceId)
		lb, err := c.loadBalancerInterface(ctx, eni)
		if err != nil {
			return err
		}
		// A load balancer holding it is expected: it is this replica's,
		// once placed. Anything else holds an address we would take.
		if !lb {
			obs.Problems = append(obs.Problems, fmt.Sprintf("Elastic IP %s is associated with network interface %s, which is not a load balancer's: release it from there first", obs.AllocationID, eni))
		}
	}
	return nil
}

// loadBalancerInterface says whether a network interface belongs to a
// network load balancer.
func (c Checker) loadBalancerInterface(ctx context.Context, eni string) (bool, error) {
	out, err := c.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eni}})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describing network interface %s: %w", eni, err)
	}
	for _, ni := range out.NetworkInterfaces {
		if ni.InterfaceType == ec2types.NetworkInterfaceTypeNetworkLoadBalancer || strings.HasPrefix(aws.ToString(ni.Description), "ELB net/") {
			return true, nil
		}
	}
	return false, nil
}

// notFound tells EC2's "no such ID" errors (InvalidSubnetID.NotFound,
// InvalidAllocationID.NotFound, ...) from failures to ask.
func notFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.HasSuffix(ae.ErrorCode(), ".NotFound")
}
