package resolve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/peerrelay/peerrelay/test/harness"
)

// describeLoadBalancersXML is the shape AWS answers DescribeLoadBalancers
// with for an internet-facing NLB with one Elastic IP per zone (from the
// ELBv2 API reference). moto leaves LoadBalancerAddresses out, so this is
// how the extraction is proved against the real SDK's parser.
const describeLoadBalancersXML = `<DescribeLoadBalancersResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/">
  <DescribeLoadBalancersResult>
    <LoadBalancers>
      <member>
        <LoadBalancerArn>arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/k8s-teama-myrelay0-0123abcd/0123456789abcdef</LoadBalancerArn>
        <LoadBalancerName>k8s-teama-myrelay0-0123abcd</LoadBalancerName>
        <DNSName>k8s-teama-myrelay0-0123abcd-0123456789abcdef.elb.us-east-1.amazonaws.com</DNSName>
        <Scheme>internet-facing</Scheme>
        <Type>network</Type>
        <AvailabilityZones>
          <member>
            <ZoneName>us-east-1a</ZoneName>
            <SubnetId>subnet-0aa</SubnetId>
            <LoadBalancerAddresses>
              <member><IpAddress>198.51.100.20</IpAddress><AllocationId>eipalloc-0aa</AllocationId></member>
            </LoadBalancerAddresses>
          </member>
          <member>
            <ZoneName>us-east-1b</ZoneName>
            <SubnetId>subnet-0bb</SubnetId>
            <LoadBalancerAddresses>
              <member><AllocationId>eipalloc-0bb</AllocationId></member>
            </LoadBalancerAddresses>
          </member>
        </AvailabilityZones>
      </member>
    </LoadBalancers>
  </DescribeLoadBalancersResult>
  <ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>
</DescribeLoadBalancersResponse>`

const describeAddressesXML = `<DescribeAddressesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>2</requestId>
  <addressesSet>
    <item><publicIp>198.51.100.21</publicIp><allocationId>eipalloc-0bb</allocationId><domain>vpc</domain></item>
  </addressesSet>
</DescribeAddressesResponse>`

func TestAWSAddressesFromResponseShape(t *testing.T) {
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		calls = append(calls, r.Form.Get("Action")+" "+r.Form.Get("Names.member.1")+r.Form.Get("AllocationId.1"))
		w.Header().Set("Content-Type", "text/xml")
		switch r.Form.Get("Action") {
		case "DescribeLoadBalancers":
			_, _ = w.Write([]byte(describeLoadBalancersXML))
		case "DescribeAddresses":
			_, _ = w.Write([]byte(describeAddressesXML))
		default:
			http.Error(w, "unexpected", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	a := AWSResolver{
		ELB: elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds}),
		EC2: ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds}),
	}
	got, err := a.LoadBalancerAddresses(context.Background(), "k8s-teama-myrelay0-0123abcd-0123456789abcdef.elb.us-east-1.amazonaws.com", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("198.51.100.20"), netip.MustParseAddr("198.51.100.21")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("addresses -want +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"DescribeLoadBalancers k8s-teama-myrelay0-0123abcd", "DescribeAddresses eipalloc-0bb"}, calls); diff != "" {
		t.Errorf("API calls -want +got:\n%s", diff)
	}
}

// TestAWSAgainstMoto creates a VPC, subnets, Elastic IPs and an NLB in moto
// and resolves it through the real API path. moto reports no
// LoadBalancerAddresses, so the honest expectation is an empty answer (and
// the Resolver then falls back to DNS, covered in TestResolve).
func TestAWSAgainstMoto(t *testing.T) {
	m := harness.StartMoto(t)
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider("testing", "testing", "")
	e := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), Credentials: creds})
	l := elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), Credentials: creds})

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
		Name: aws.String("relay-0"), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme: elbtypes.LoadBalancerSchemeEnumInternetFacing, SubnetMappings: mappings,
	})
	if err != nil {
		t.Fatal(err)
	}
	dnsName := *lb.LoadBalancers[0].DNSName
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
