package harness

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// AWSClients returns EC2 and ELBv2 clients for moto in us-east-1.
func (m *Moto) AWSClients() (*ec2.Client, *elbv2.Client) {
	creds := credentials.NewStaticCredentialsProvider("testing", "testing", "")
	return ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), Credentials: creds}),
		elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), Credentials: creds})
}

// CreateNLB makes what a relay replica's NLB stands on in moto: a VPC, a
// subnet and an Elastic IP in each of two zones, and an internet-facing
// network load balancer named name mapped to them. It returns its DNS name.
func (m *Moto) CreateNLB(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	e, l := m.AWSClients()
	vpc, err := e.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var mappings []elbtypes.SubnetMapping
	for i, az := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := e.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String([]string{"10.0.1.0/24", "10.0.2.0/24"}[i]), AvailabilityZone: aws.String(az)})
		if err != nil {
			t.Fatal(err)
		}
		eip, err := e.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc})
		if err != nil {
			t.Fatal(err)
		}
		mappings = append(mappings, elbtypes.SubnetMapping{SubnetId: sn.Subnet.SubnetId, AllocationId: eip.AllocationId})
	}
	lb, err := l.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
		Name: aws.String(name), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme: elbtypes.LoadBalancerSchemeEnumInternetFacing, SubnetMappings: mappings,
	})
	if err != nil {
		t.Fatal(err)
	}
	return *lb.LoadBalancers[0].DNSName
}
