package resolve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/google/go-cmp/cmp"
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
	got, err := a.LoadBalancerAddresses(context.Background(), "k8s-teama-myrelay0-0123abcd-0123456789abcdef.elb.us-east-1.amazonaws.com", "", "team-a")
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
