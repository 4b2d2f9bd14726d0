package placement

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/peerrelay/peerrelay/test/harness/cloud"
)

// TestCheckAllocationOwnership: the check runs with the platform's
// credentials, so an Elastic IP is usable only when its tags say it is the
// RelayConfig's namespace's; another team's is refused naming only its
// allocation ID and the tags wanted, whatever holds it.
func TestCheckAllocationOwnership(t *testing.T) {
	m := cloud.StartMoto(t)
	n := m.CreateAWSNetwork(t, "team-a")
	ctx := context.Background()
	e, _ := m.AWSClients()

	// Another team's addresses held by its instance and by a network
	// interface of its own: their IDs are that team's to know.
	associate := func(in *ec2.AssociateAddressInput) {
		t.Helper()
		if _, err := e.AssociateAddress(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	inst, err := e.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(n.PublicSubnet)})
	if err != nil {
		t.Fatal(err)
	}
	theirInstance := aws.ToString(inst.Instances[0].InstanceId)
	theirsOnInstance := m.AllocateAddress(t, cloud.NamespaceTags(cloud.ForeignNamespace))
	associate(&ec2.AssociateAddressInput{AllocationId: aws.String(theirsOnInstance), InstanceId: aws.String(theirInstance)})
	newENI := func() string {
		t.Helper()
		eni, err := e.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(n.PublicSubnet)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(eni.NetworkInterface.NetworkInterfaceId)
	}
	theirENI, ourENI := newENI(), newENI()
	theirsOnENI := m.AllocateAddress(t, cloud.NamespaceTags(cloud.ForeignNamespace))
	associate(&ec2.AssociateAddressInput{AllocationId: aws.String(theirsOnENI), NetworkInterfaceId: aws.String(theirENI)})
	oursOnENI := m.AllocateAddress(t, cloud.NamespaceTags("team-a"))
	associate(&ec2.AssociateAddressInput{AllocationId: aws.String(oursOnENI), NetworkInterfaceId: aws.String(ourENI)})

	const notOurs = "is not this namespace's: it carries neither tag peerrelay.io/namespace=team-a nor peerrelay.io/relay=team-a/…"
	cases := map[string]struct {
		reason  string
		alloc   string
		problem string // fragment; "" for none
	}{
		"SetAside": {
			reason: "An Elastic IP the platform team tagged for team-a.",
			alloc:  n.FreeAllocations[0],
		},
		"Composed": {
			reason: "An Elastic IP the function composed for a PeerRelay in team-a carries its relay tag.",
			alloc:  m.AllocateAddress(t, map[string]string{"peerrelay.io/relay": "team-a/x", "Name": "x-0"}),
		},
		"Untagged": {
			reason:  "An untagged Elastic IP is no namespace's.",
			alloc:   m.AllocateAddress(t, nil),
			problem: notOurs,
		},
		"OtherTeamFree": {
			reason:  "team-b's unassociated Elastic IP would pass every other check: it is refused.",
			alloc:   n.ForeignAllocation,
			problem: notOurs,
		},
		"Lookalike": {
			reason:  "A PeerRelay in team-ab is not one in team-a.",
			alloc:   m.AllocateAddress(t, map[string]string{"peerrelay.io/relay": "team-ab/x"}),
			problem: notOurs,
		},
		"OtherTeamOnInstance": {
			reason:  "team-b's Elastic IP on an instance: refused without naming the instance.",
			alloc:   theirsOnInstance,
			problem: notOurs,
		},
		"OtherTeamOnInterface": {
			reason:  "team-b's Elastic IP on a network interface: refused without naming the interface.",
			alloc:   theirsOnENI,
			problem: notOurs,
		},
		"OursOnInstance": {
			reason:  "team-a's own Elastic IP held by an instance: the message may name it.",
			alloc:   n.UsedAllocation,
			problem: "is associated with instance " + n.Instance,
		},
		"OursOnInterface": {
			reason:  "team-a's own Elastic IP held by a network interface that is no load balancer's.",
			alloc:   oursOnENI,
			problem: "is associated with network interface " + ourENI,
		},
	}
	c := Checker{EC2: e, Namespace: "team-a"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs, err := c.Check(ctx, "", tc.alloc)
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			got := strings.Join(obs.Problems, "; ")
			switch {
			case tc.problem == "" && got != "":
				t.Errorf("%s\nwant no problems, got %q", tc.reason, got)
			case tc.problem != "" && !strings.Contains(got, "Elastic IP "+tc.alloc+" "+tc.problem):
				t.Errorf("%s\nwant a problem containing %q, got %q", tc.reason, tc.problem, got)
			}
			if tc.problem == notOurs {
				if len(obs.Problems) != 1 {
					t.Errorf("%s\nwant the ownership problem alone, got %q", tc.reason, obs.Problems)
				}
				for _, leak := range []string{theirInstance, theirENI, "i-", "eni-", "team-b", "team-ab", "associated"} {
					if strings.Contains(got, leak) {
						t.Errorf("%s\nthe problems tell %q: %q", tc.reason, leak, got)
					}
				}
			}
		})
	}

	if _, err := (Checker{EC2: e}).Check(ctx, "", n.FreeAllocations[0]); err == nil {
		t.Error("a Checker without a namespace: want an error, not a check that owns nothing or everything")
	}
}
