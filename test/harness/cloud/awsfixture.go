package cloud

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// AWSClients returns EC2 and ELBv2 clients for moto in us-east-1.
func (m *Moto) AWSClients() (*ec2.Client, *elbv2.Client) {
	creds := credentials.NewStaticCredentialsProvider("testing", "testing", "")
	return ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), Credentials: creds}),
		elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), Credentials: creds})
}

// NamespaceTags are the tags a platform team puts on what it sets aside
// for namespace ns: the provider uses an Elastic IP or a load balancer a
// RelayConfig names only when it carries them (or the function's own).
func NamespaceTags(ns string) map[string]string {
	return map[string]string{v1alpha1.TagNamespace: ns}
}

// ForeignNamespace is the namespace CreateAWSNetwork's ForeignAllocation is
// set aside for: no test's RelayConfigs are in it.
const ForeignNamespace = "team-b"

// CreateNLB makes what a relay replica's NLB stands on in moto: a VPC, a
// subnet and an Elastic IP in each of two zones, and an internet-facing
// network load balancer named name mapped to them, carrying tags (what an
// Elastic IP or load balancer is tagged with is what the provider
// checks). It returns its DNS name.
func (m *Moto) CreateNLB(t testing.TB, name string, tags map[string]string) string {
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
		eip := m.AllocateAddress(t, tags)
		mappings = append(mappings, elbtypes.SubnetMapping{SubnetId: sn.Subnet.SubnetId, AllocationId: aws.String(eip)})
	}
	lb, err := l.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
		Name: aws.String(name), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme: elbtypes.LoadBalancerSchemeEnumInternetFacing, SubnetMappings: mappings, Tags: elbTags(tags),
	})
	if err != nil {
		t.Fatal(err)
	}
	return *lb.LoadBalancers[0].DNSName
}

// AWSNetwork is a VPC in moto with the subnets and Elastic IPs the
// placement checks meet in real accounts.
type AWSNetwork struct {
	VPCID string
	// PublicSubnet routes to an internet gateway (zone us-east-1a);
	// MappedSubnet only maps public IPs on launch (us-east-1b);
	// PrivateSubnet has neither (us-east-1c).
	PublicSubnet, MappedSubnet, PrivateSubnet string
	// FreeAllocations are two unassociated Elastic IPs; UsedAllocation is
	// associated with an instance. All three are set aside for the
	// namespace CreateAWSNetwork was given (NamespaceTags).
	FreeAllocations [2]string
	UsedAllocation  string
	Instance        string
	// ForeignAllocation is an unassociated Elastic IP set aside for
	// ForeignNamespace: another team's.
	ForeignAllocation string
}

// CreateAWSNetwork builds an AWSNetwork in moto, its Elastic IPs set
// aside for namespace ns.
func (m *Moto) CreateAWSNetwork(t testing.TB, ns string) AWSNetwork {
	t.Helper()
	ctx := context.Background()
	e, _ := m.AWSClients()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var n AWSNetwork
	vpc, err := e.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.1.0.0/16")})
	check(err)
	n.VPCID = *vpc.Vpc.VpcId
	subnet := func(cidr, az string) string {
		sn, err := e.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(cidr), AvailabilityZone: aws.String(az)})
		check(err)
		return *sn.Subnet.SubnetId
	}
	n.PublicSubnet = subnet("10.1.1.0/24", "us-east-1a")
	n.MappedSubnet = subnet("10.1.2.0/24", "us-east-1b")
	n.PrivateSubnet = subnet("10.1.3.0/24", "us-east-1c")

	igw, err := e.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{})
	check(err)
	_, err = e.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{InternetGatewayId: igw.InternetGateway.InternetGatewayId, VpcId: vpc.Vpc.VpcId})
	check(err)
	rt, err := e.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: vpc.Vpc.VpcId})
	check(err)
	_, err = e.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: rt.RouteTable.RouteTableId, DestinationCidrBlock: aws.String("0.0.0.0/0"), GatewayId: igw.InternetGateway.InternetGatewayId})
	check(err)
	_, err = e.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: rt.RouteTable.RouteTableId, SubnetId: aws.String(n.PublicSubnet)})
	check(err)
	_, err = e.ModifySubnetAttribute(ctx, &ec2.ModifySubnetAttributeInput{SubnetId: aws.String(n.MappedSubnet), MapPublicIpOnLaunch: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)}})
	check(err)

	if ns == ForeignNamespace {
		t.Fatalf("CreateAWSNetwork: namespace %s is the foreign one", ns)
	}
	for i := range n.FreeAllocations {
		n.FreeAllocations[i] = m.AllocateAddress(t, NamespaceTags(ns))
	}
	n.ForeignAllocation = m.AllocateAddress(t, NamespaceTags(ForeignNamespace))
	n.UsedAllocation = m.AllocateAddress(t, NamespaceTags(ns))
	inst, err := e.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(n.PublicSubnet)})
	check(err)
	n.Instance = *inst.Instances[0].InstanceId
	_, err = e.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: aws.String(n.UsedAllocation), InstanceId: aws.String(n.Instance)})
	check(err)
	return n
}

// AllocateAddress allocates a VPC Elastic IP tagged with tags (none when
// nil) and returns its allocation ID.
func (m *Moto) AllocateAddress(t testing.TB, tags map[string]string) string {
	t.Helper()
	e, _ := m.AWSClients()
	in := &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc}
	if len(tags) > 0 {
		spec := ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeElasticIp}
		for k, v := range tags {
			spec.Tags = append(spec.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []ec2types.TagSpecification{spec}
	}
	out, err := e.AllocateAddress(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return *out.AllocationId
}

func elbTags(tags map[string]string) []elbtypes.Tag {
	var out []elbtypes.Tag
	for k, v := range tags {
		out = append(out, elbtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

// CreatePlacedNLB makes an internet-facing network load balancer named
// name in one subnet with one Elastic IP, carrying tags, as a Managed
// replica's LB is.
func (m *Moto) CreatePlacedNLB(t testing.TB, name, subnetID, allocationID string, tags map[string]string) {
	t.Helper()
	_, l := m.AWSClients()
	_, err := l.CreateLoadBalancer(context.Background(), &elbv2.CreateLoadBalancerInput{
		Name: aws.String(name), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme:         elbtypes.LoadBalancerSchemeEnumInternetFacing,
		SubnetMappings: []elbtypes.SubnetMapping{{SubnetId: aws.String(subnetID), AllocationId: aws.String(allocationID)}},
		Tags:           elbTags(tags),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// PublicIP returns an Elastic IP's address.
func (m *Moto) PublicIP(t testing.TB, allocationID string) string {
	t.Helper()
	e, _ := m.AWSClients()
	out, err := e.DescribeAddresses(context.Background(), &ec2.DescribeAddressesInput{AllocationIds: []string{allocationID}})
	if err != nil || len(out.Addresses) == 0 {
		t.Fatalf("describing %s: %v", allocationID, err)
	}
	return *out.Addresses[0].PublicIp
}
