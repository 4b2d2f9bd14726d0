package relayconfig_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

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
// with it, naming the ID.
func TestAWSPlacementCheck(t *testing.T) {
	m := cloud.StartMoto(t)
	n := m.CreateAWSNetwork(t)
	e := awsEnv(t, m)

	type want struct {
		zone    string
		problem string // fragment; "" for a valid placement
		reason  string
	}
	cases := map[string]struct {
		reason        string
		subnet, alloc string
		want          want
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
		rc := e.waitFor(t, name, "an AWS placement check", func(rc *v1alpha1.RelayConfig) bool {
			a := rc.Status.AtProvider.AWS
			return a != nil && a.Checked && a.SubnetID == tc.subnet && a.AllocationID == tc.alloc
		})
		a := rc.Status.AtProvider.AWS
		if tc.want.zone != "" && (a.Zone != tc.want.zone || a.VPCID != n.VPCID) {
			t.Errorf("%s: %s\nzone/VPC: want %s in %s, got %s in %s", name, tc.reason, tc.want.zone, n.VPCID, a.Zone, a.VPCID)
		}
		switch {
		case tc.want.problem == "" && len(a.Problems) > 0:
			t.Errorf("%s: %s\nwant no problems, got %v", name, tc.reason, a.Problems)
		case tc.want.problem != "" && !strings.Contains(strings.Join(a.Problems, "; "), tc.want.problem):
			t.Errorf("%s: %s\nwant a problem containing %q, got %v", name, tc.reason, tc.want.problem, a.Problems)
		}
		if c := rc.GetCondition(v1alpha1.ConditionAWSPlacement); string(c.Reason) != tc.want.reason {
			t.Errorf("%s: %s\ncondition %s: want reason %s, got %+v", name, tc.reason, v1alpha1.ConditionAWSPlacement, tc.want.reason, c)
		}
		// The check never stands in the way of the relay's own config.
		e.config(t, name+"-config", "the ingress endpoint", endpointsAre("203.0.113.50:41641"))
		// A valid placement is the provider's record of the last valid one.
		if valid := tc.want.problem == ""; valid != (a.LastValid != nil && a.LastValid.SubnetID == tc.subnet && a.LastValid.AllocationID == tc.alloc) {
			t.Errorf("%s: %s\nlastValid %+v, want this placement: %v", name, tc.reason, a.LastValid, valid)
		}
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
	must(t, e.c.Update(context.Background(), rc))
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
	n := m.CreateAWSNetwork(t)
	e := awsEnv(t, m)
	e.relayConfig(t, "relay-0", func(rc *v1alpha1.RelayConfig) {
		rc.Spec.ForProvider.ServiceRef = nil
		rc.Spec.ForProvider.Resolution = v1alpha1.ResolutionAWS
		rc.Spec.ForProvider.AWS = &v1alpha1.AWSResolution{LoadBalancerName: "my-relay-0123abcd-0", SubnetID: n.PublicSubnet, AllocationID: n.FreeAllocations[0]}
	})
	e.waitFor(t, "relay-0", "AwaitingAddress while the load balancer does not exist", func(rc *v1alpha1.RelayConfig) bool {
		return rc.GetCondition(v1alpha1.ConditionResolved).Reason == v1alpha1.ReasonAwaitingAddress
	})
	m.CreatePlacedNLB(t, "my-relay-0123abcd-0", n.PublicSubnet, n.FreeAllocations[0])
	touchRelayConfig(t, e, "relay-0")
	ip := m.PublicIP(t, n.FreeAllocations[0])
	e.config(t, "relay-0-config", "the load balancer's Elastic IP", endpointsAre(ip+":41641"))
}

// TestAWSPlacementCheckRetried: a check that AWS fails (a timeout, a 5xx)
// is retried with backoff, not at the next poll (an hour here, 10 minutes
// by default), while the replica's Service waits for it; nothing touches
// the RelayConfig in between.
func TestAWSPlacementCheckRetried(t *testing.T) {
	m := cloud.StartMoto(t)
	n := m.CreateAWSNetwork(t)
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
