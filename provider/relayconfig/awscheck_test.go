package relayconfig_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/test/harness/cloud"
	"github.com/peerrelay/peerrelay/test/harness/providertest"
)

// TestAWSPlacementCheck: RelayConfigs name subnets and Elastic IPs of a
// moto VPC; the provider reports each one's zone and VPC, or what is wrong
// with it, naming the ID. An Elastic IP must be the RelayConfig's
// namespace's: the check uses the platform's credentials, which reach
// every team's, and tells nothing of another team's but that it is not
// this namespace's.
func TestAWSPlacementCheck(t *testing.T) {
	m := cloud.StartMoto(t)
	e := awsEnv(t, m)
	n := m.CreateAWSNetwork(t, e.ns)
	// Another team's Elastic IPs held by its own instance and network
	// interface: their IDs are that team's to know.
	ec2c, _ := m.AWSClients()
	ctx := context.Background()
	inst, err := ec2c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(n.PublicSubnet)})
	must(t, err)
	theirInstance := aws.ToString(inst.Instances[0].InstanceId)
	theirsOnInstance := m.AllocateAddress(t, cloud.NamespaceTags(cloud.ForeignNamespace))
	_, err = ec2c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: aws.String(theirsOnInstance), InstanceId: aws.String(theirInstance)})
	must(t, err)
	eni, err := ec2c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(n.PublicSubnet)})
	must(t, err)
	theirENI := aws.ToString(eni.NetworkInterface.NetworkInterfaceId)
	theirsOnENI := m.AllocateAddress(t, cloud.NamespaceTags(cloud.ForeignNamespace))
	_, err = ec2c.AssociateAddress(ctx, &ec2.AssociateAddressInput{AllocationId: aws.String(theirsOnENI), NetworkInterfaceId: aws.String(theirENI)})
	must(t, err)
	notOurs := func(alloc string) string {
		return "Elastic IP " + alloc + " is not this namespace's: it carries neither tag peerrelay.io/namespace=" + e.ns + " nor peerrelay.io/relay=" + e.ns + "/…"
	}

	type want struct {
		zone    string
		problem string // fragment; "" for a valid placement
		reason  string
	}
	cases := map[string]struct {
		reason        string
		subnet, alloc string
		want          want
		// untold appear nowhere in the RelayConfig's status.
		untold []string
	}{
		"public-by-route": {
			reason: "A subnet whose route table reaches an internet gateway, and a free Elastic IP.",
			subnet: n.PublicSubnet, alloc: n.FreeAllocations[0],
			want: want{zone: "us-east-1a", reason: string(v1alpha1.ReasonPlacementValid)},
		},
		"public-by-mapping": {
			reason: "A subnet that maps public IPs on launch counts as public.",
			subnet: n.MappedSubnet, alloc: n.FreeAllocations[1],
			want: want{zone: "us-east-1b", reason: string(v1alpha1.ReasonPlacementValid)},
		},
		"private-subnet": {
			reason: "No internet gateway route, no public mapping: not public.",
			subnet: n.PrivateSubnet,
			want:   want{zone: "us-east-1c", problem: "subnet " + n.PrivateSubnet + " is not public", reason: string(v1alpha1.ReasonPlacementBad)},
		},
		"no-such-subnet": {
			reason: "A subnet that does not exist.",
			subnet: "subnet-0123456789abcdef0",
			want:   want{problem: "subnet subnet-0123456789abcdef0 does not exist", reason: string(v1alpha1.ReasonPlacementBad)},
		},
		"used-allocation": {
			reason: "An Elastic IP held by an instance would be taken from it.",
			subnet: n.PublicSubnet, alloc: n.UsedAllocation,
			want: want{zone: "us-east-1a", problem: "Elastic IP " + n.UsedAllocation + " is associated with instance " + n.Instance, reason: string(v1alpha1.ReasonPlacementBad)},
		},
		"composed-allocation": {
			reason: "An Elastic IP the function composed for a PeerRelay in this namespace carries its relay tag.",
			subnet: n.PublicSubnet, alloc: m.AllocateAddress(t, map[string]string{"peerrelay.io/relay": e.ns + "/x", "Name": "x-0"}),
			want: want{zone: "us-east-1a", reason: string(v1alpha1.ReasonPlacementValid)},
		},
		"other-teams-allocation": {
			reason: "Another team's unassociated Elastic IP passes every other check: it is not taken.",
			subnet: n.PublicSubnet, alloc: n.ForeignAllocation,
			want: want{zone: "us-east-1a", problem: notOurs(n.ForeignAllocation), reason: string(v1alpha1.ReasonPlacementBad)},
		},
		"other-teams-allocation-on-instance": {
			reason: "Another team's Elastic IP on its instance: refused without naming the instance.",
			subnet: n.PublicSubnet, alloc: theirsOnInstance,
			want:   want{zone: "us-east-1a", problem: notOurs(theirsOnInstance), reason: string(v1alpha1.ReasonPlacementBad)},
			untold: []string{theirInstance, "i-", "associated", cloud.ForeignNamespace},
		},
		"other-teams-allocation-on-interface": {
			reason: "Another team's Elastic IP on its network interface: refused without naming the interface.",
			subnet: n.PublicSubnet, alloc: theirsOnENI,
			want:   want{zone: "us-east-1a", problem: notOurs(theirsOnENI), reason: string(v1alpha1.ReasonPlacementBad)},
			untold: []string{theirENI, "eni-", "associated", cloud.ForeignNamespace},
		},
		"untagged-allocation": {
			reason: "An untagged Elastic IP is no namespace's.",
			subnet: n.PublicSubnet, alloc: m.AllocateAddress(t, nil),
			want: want{zone: "us-east-1a", problem: " is not this namespace's", reason: string(v1alpha1.ReasonPlacementBad)},
		},
		"no-such-allocation": {
			reason: "An Elastic IP that does not exist.",
			subnet: n.PublicSubnet, alloc: "eipalloc-0123456789abcdef0",
			want: want{problem: "Elastic IP eipalloc-0123456789abcdef0 does not exist", reason: string(v1alpha1.ReasonPlacementBad)},
		},
	}
	for name, tc := range cases {
		e.service(t, name, corev1.LoadBalancerIngress{IP: "203.0.113.50"})
		e.relayConfig(t, name, func(rc *v1alpha1.RelayConfig) {
			rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{SubnetID: tc.subnet, AllocationID: tc.alloc}
		})
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rc := e.waitFor(t, name, "an AWS placement check", func(rc *v1alpha1.RelayConfig) bool {
				a := rc.Status.AtProvider.AWS
				return a != nil && a.Checked && a.SubnetID == tc.subnet && a.AllocationID == tc.alloc
			})
			a := rc.Status.AtProvider.AWS
			if tc.want.zone != "" && (a.Zone != tc.want.zone || a.VPCID != n.VPCID) {
				t.Errorf("%s\nzone/VPC: want %s in %s, got %s in %s", tc.reason, tc.want.zone, n.VPCID, a.Zone, a.VPCID)
			}
			switch {
			case tc.want.problem == "" && len(a.Problems) > 0:
				t.Errorf("%s\nwant no problems, got %v", tc.reason, a.Problems)
			case tc.want.problem != "" && !strings.Contains(strings.Join(a.Problems, "; "), tc.want.problem):
				t.Errorf("%s\nwant a problem containing %q, got %v", tc.reason, tc.want.problem, a.Problems)
			}
			if c := rc.GetCondition(v1alpha1.ConditionAWSPlacement); string(c.Reason) != tc.want.reason {
				t.Errorf("%s\ncondition %s: want reason %s, got %+v", tc.reason, v1alpha1.ConditionAWSPlacement, tc.want.reason, c)
			}
			status, err := json.Marshal(rc.Status)
			must(t, err)
			for _, u := range tc.untold {
				if strings.Contains(string(status), u) {
					t.Errorf("%s\nthe status tells %q: %s", tc.reason, u, status)
					break // one dump of the status is enough
				}
			}
			// The check never stands in the way of the relay's own config.
			e.config(t, name+"-config", "the ingress endpoint", endpointsAre("203.0.113.50:41641"))
			// A valid placement is the provider's record of the last valid one.
			if valid := tc.want.problem == ""; valid != (a.LastValid != nil && a.LastValid.SubnetID == tc.subnet && a.LastValid.AllocationID == tc.alloc) {
				t.Errorf("%s\nlastValid %+v, want this placement: %v", tc.reason, a.LastValid, valid)
			}
		})
	}

	// A valid placement changed to a bad one: the valid one stays the
	// record, what the function keeps the replica's Service on.
	e.service(t, "moved", corev1.LoadBalancerIngress{IP: "203.0.113.51"})
	e.relayConfig(t, "moved", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{SubnetID: n.PublicSubnet, AllocationID: n.FreeAllocations[0]}
	})
	e.waitFor(t, "moved", "a valid placement recorded", func(rc *v1alpha1.RelayConfig) bool {
		a := rc.Status.AtProvider.AWS
		return a != nil && a.LastValid != nil && a.LastValid.AllocationID == n.FreeAllocations[0]
	})
	rc := e.get(t, "moved")
	rc.Spec.ForProvider.AWS.AllocationID = n.UsedAllocation
	must(t, e.c.Update(ctx, rc))
	rc = e.waitFor(t, "moved", "the bad placement checked", func(rc *v1alpha1.RelayConfig) bool {
		a := rc.Status.AtProvider.AWS
		return a != nil && a.AllocationID == n.UsedAllocation && len(a.Problems) > 0
	})
	if v := rc.Status.AtProvider.AWS.LastValid; v == nil || v.AllocationID != n.FreeAllocations[0] {
		t.Errorf("after a bad placement, lastValid %+v, want the valid one before it (%s)", v, n.FreeAllocations[0])
	}
}

// TestManagedLoadBalancerResolution: a RelayConfig with no Service resolves
// the load balancer composed for it, by name: nothing while it does not
// exist, then its Elastic IP's address.
func TestManagedLoadBalancerResolution(t *testing.T) {
	m := cloud.StartMoto(t)
	e := awsEnv(t, m)
	n := m.CreateAWSNetwork(t, e.ns)
	e.relayConfig(t, "relay-0", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.ServiceRef = nil
		rc.Spec.ForProvider.Resolution = v1alpha1.ResolutionAWS
		rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{LoadBalancerName: "my-relay-0123abcd-0", SubnetID: n.PublicSubnet, AllocationID: n.FreeAllocations[0]}
	})
	e.waitFor(t, "relay-0", "AwaitingAddress while the load balancer does not exist", func(rc *v1alpha1.RelayConfig) bool {
		return rc.GetCondition(v1alpha1.ConditionResolved).Reason == v1alpha1.ReasonAwaitingAddress
	})
	// Tagged as the function tags the load balancers it composes.
	m.CreatePlacedNLB(t, "my-relay-0123abcd-0", n.PublicSubnet, n.FreeAllocations[0], map[string]string{"peerrelay.io/relay": e.ns + "/my-relay"})
	touchRelayConfig(t, e, "relay-0")
	ip := m.PublicIP(t, n.FreeAllocations[0])
	e.config(t, "relay-0-config", "the load balancer's Elastic IP", endpointsAre(ip+":41641"))
}

// TestLoadBalancerOfAnotherTeam: a RelayConfig a tenant writes itself
// (crossplane-edit) names another team's load balancer, and its Elastic IP,
// by name. The provider looks it up with the platform's credentials, so it
// refuses it, naming the field and the tags it lacks, and advertises
// nothing of it.
func TestLoadBalancerOfAnotherTeam(t *testing.T) {
	m := cloud.StartMoto(t)
	e := awsEnv(t, m)
	n := m.CreateAWSNetwork(t, e.ns)
	const theirs = "their-relay-0123abcd-0"
	m.CreatePlacedNLB(t, theirs, n.PublicSubnet, n.ForeignAllocation, map[string]string{"peerrelay.io/relay": cloud.ForeignNamespace + "/their-relay"})
	theirIP := m.PublicIP(t, n.ForeignAllocation)
	e.relayConfig(t, "relay-0", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.ServiceRef = nil
		rc.Spec.ForProvider.Resolution = v1alpha1.ResolutionAWS
		rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{LoadBalancerName: theirs, SubnetID: n.PublicSubnet, AllocationID: n.ForeignAllocation}
	})
	want := `spec.forProvider.aws.loadBalancerName "` + theirs + `": not this namespace's load balancer: it carries neither tag peerrelay.io/namespace=` + e.ns + ` nor peerrelay.io/relay=` + e.ns + "/…"
	rc := e.waitFor(t, "relay-0", "ResolveFailed naming the field", func(rc *v1alpha1.RelayConfig) bool {
		c := rc.GetCondition(v1alpha1.ConditionResolved)
		return c.Reason == v1alpha1.ReasonResolveFailed && strings.Contains(c.Message, want)
	})
	c := e.config(t, "relay-0-config", "no endpoint", endpointsAre())
	for _, ep := range c.RelayServerStaticEndpoints {
		if ep.Addr().String() == theirIP {
			t.Errorf("the config advertises the other team's address %s", theirIP)
		}
	}
	status, err := json.Marshal(rc.Status)
	must(t, err)
	for _, u := range []string{theirIP, "arn:", cloud.ForeignNamespace, ".elb."} {
		if strings.Contains(string(status), u) {
			t.Errorf("the status tells %q of the other team's load balancer: %s", u, status)
			break // one dump of the status is enough
		}
	}
}

// TestAWSPlacementCheckRetried: a check that AWS fails (a timeout, a 5xx)
// is retried with backoff, not at the next poll (an hour here, 10 minutes
// by default), while the replica's Service waits for it; nothing touches
// the RelayConfig in between.
func TestAWSPlacementCheckRetried(t *testing.T) {
	m := cloud.StartMoto(t)
	n := m.CreateAWSNetwork(t, "team-a")
	faults := cloud.StartFaultProxy(t, m.Endpoint)
	faults.Fail(http.StatusInternalServerError)
	e := awsEnvAt(t, faults.URL)
	e.service(t, "relay-0", corev1.LoadBalancerIngress{IP: "203.0.113.50"})
	e.relayConfig(t, "relay-0", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{SubnetID: n.PublicSubnet, AllocationID: n.FreeAllocations[0]}
	})
	// Once the config is written, the failure is the reconcile's: Synced
	// says so, and the reconciler retries.
	e.waitFor(t, "relay-0", "CheckFailed and Synced=False while AWS fails", func(rc *v1alpha1.RelayConfig) bool {
		synced := rc.GetCondition(xpv2.TypeSynced)
		return rc.GetCondition(v1alpha1.ConditionAWSPlacement).Reason == v1alpha1.ReasonCheckFailed &&
			synced.Status == corev1.ConditionFalse && strings.Contains(synced.Message, "cannot check the placement against AWS")
	})
	e.config(t, "relay-0-config", "the ingress endpoint, the check failing or not", endpointsAre("203.0.113.50:41641"))
	faults.Fail(0)
	e.waitFor(t, "relay-0", "a placement checked once AWS answers", func(rc *v1alpha1.RelayConfig) bool {
		a := rc.Status.AtProvider.AWS
		return a != nil && a.Checked && a.AllocationID == n.FreeAllocations[0] &&
			rc.GetCondition(v1alpha1.ConditionAWSPlacement).Reason == v1alpha1.ReasonPlacementValid &&
			rc.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue
	})
}

func awsEnv(t *testing.T, m *cloud.Moto) *env {
	t.Helper()
	return awsEnvAt(t, m.Endpoint)
}

// awsEnvAt is awsEnv with the AWS API at endpoint (a fault proxy).
func awsEnvAt(t *testing.T, endpoint string) *env {
	t.Helper()
	e := startWith(t, providertest.Options{ProviderConfig: v1alpha1.ProviderConfigSpec{
		AWS: &v1alpha1.AWSConfig{Source: v1alpha1.AWSCredentialsSecret, SecretRef: &v1alpha1.SecretRef{Name: "aws", Namespace: "team-a"}, Region: "us-east-1", Endpoint: endpoint},
	}})
	must(t, e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "aws"},
		Data: map[string][]byte{"aws_access_key_id": []byte("testing"), "aws_secret_access_key": []byte("testing")}}))
	return e
}

// touchRelayConfig changes an annotation so the provider looks again now
// rather than at its next poll.
func touchRelayConfig(t *testing.T, e *env, name string) {
	t.Helper()
	rc := &v1alpha1.RelayConfig{}
	must(t, e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, rc))
	meta := rc.GetAnnotations()
	if meta == nil {
		meta = map[string]string{}
	}
	meta["touched"] = "now"
	rc.SetAnnotations(meta)
	must(t, e.c.Update(context.Background(), rc))
}
