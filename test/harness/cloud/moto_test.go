package cloud

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestMotoAnswersEC2 proves the moto harness: a real EC2 call round trips.
func TestMotoAnswersEC2(t *testing.T) {
	m := StartMoto(t)
	cli, _ := m.AWSClients()
	ctx := context.Background()
	out, err := cli.AllocateAddress(ctx, &ec2.AllocateAddressInput{})
	if err != nil {
		t.Fatalf("AllocateAddress: %v", err)
	}
	desc, err := cli.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{*out.AllocationId}})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Addresses) != 1 || *desc.Addresses[0].PublicIp != *out.PublicIp {
		t.Errorf("DescribeAddresses: want %s, got %+v", *out.PublicIp, desc.Addresses)
	}
}
