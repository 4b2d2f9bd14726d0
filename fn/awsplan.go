package fn

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// placementIDs are the subnet and Elastic IP a replica's load balancer is
// placed with.
type placementIDs struct {
	SubnetID     string
	AllocationID string
}

// awsObserved is what the function reads back to place replicas on AWS.
// It shapes what is composed, so it is part of the composition cache key.
type awsObserved struct {
	// Allocations reported by composed Elastic IPs, by replica.
	Allocations map[int]string
	// Checks the provider made of each replica's subnet and allocation.
	Checks map[int]*relayv1alpha1.AWSPlacementObservation
	// Applied is the placement each replica's Service or load balancer
	// keeps while a new one is not yet checked, or invalid: the last one
	// the provider found nothing against, as its RelayConfig's status
	// records it. Never the PeerRelay's status, which an edit tenant may
	// write. Only for a replica with no such record yet (a provider from
	// before it, or mid-upgrade) the live Service or load balancer says,
	// so an upgrade deletes no Service: what a tenant writes there it could
	// make the AWS Load Balancer Controller act on directly anyway.
	Applied map[int]placementIDs
	// PodIPs by pod name, for the Managed target registrations.
	PodIPs map[string]string
	// Names are the names the replicas' load balancers and target groups
	// were composed with (loadBalancerName).
	Names map[int]string
}

// observeAWS reads what AWS placement depends on, or returns nil when the
// PeerRelay has no spec.aws.
func observeAWS(spec map[string]any, obs observedState) *awsObserved {
	if spec["aws"] == nil {
		return nil
	}
	o := &awsObserved{}
	for key, oc := range obs.observed {
		o.read(string(key), oc.Resource)
	}
	for i, at := range obs.reports {
		if c := at.AWS; c != nil {
			setIn(&o.Checks, i, c)
			if v := c.LastValid; v != nil {
				// The provider's record wins over what the live objects say.
				setIn(&o.Applied, i, placementIDs{SubnetID: v.SubnetID, AllocationID: v.AllocationID})
			}
		}
	}
	for i, a := range o.Applied {
		if a.SubnetID == "" || a.AllocationID == "" {
			delete(o.Applied, i)
		}
	}
	for name, p := range obs.pods {
		if ip, _ := p.GetString("status.podIP"); ip != "" {
			setIn(&o.PodIPs, name, ip)
		}
	}
	return o
}

// read takes what one observed composed resource says of the placement:
// an Elastic IP's allocation, a Service's or load balancer's placement
// applied, and a load balancer's or target group's name. (A RelayConfig's
// check and record come from obs.reports.)
func (o *awsObserved) read(key string, obj *composed.Unstructured) {
	if i, ok := replicaIndex(key, keyPrefixEIP); ok {
		if id, _ := obj.GetString("status.atProvider.allocationId"); id != "" {
			setIn(&o.Allocations, i, id)
		}
	} else if i, ok := replicaIndex(key, keyPrefixService); ok {
		setIn(&o.Applied, i, placementIDs{AllocationID: obj.GetAnnotations()[annotationEIPAllocations], SubnetID: obj.GetAnnotations()[annotationSubnets]})
	} else if i, ok := replicaIndex(key, keyPrefixLoadBalancer); ok {
		sub, _ := obj.GetString("spec.forProvider.subnetMapping[0].subnetId")
		alloc, _ := obj.GetString("spec.forProvider.subnetMapping[0].allocationId")
		setIn(&o.Applied, i, placementIDs{SubnetID: sub, AllocationID: alloc})
		if n, _ := obj.GetString("spec.forProvider.name"); n != "" {
			setIn(&o.Names, i, n) // the load balancer's wins over its target group's
		}
	} else if i, ok := replicaIndex(key, keyPrefixTargetGroup); ok {
		if n, _ := obj.GetString("spec.forProvider.name"); n != "" && o.Names[i] == "" {
			setIn(&o.Names, i, n)
		}
	}
}

func setIn[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// awsPlan is how a PeerRelay's replicas are placed on AWS: present when
// spec.aws pins replicas to subnets (elasticIPs or subnets).
type awsPlan struct {
	Region  string
	Managed bool
	// Legacy: the XR is a cluster-scoped XPeerRelay, whose AWS managed
	// resources are the cluster-scoped (non-.m.) kinds.
	Legacy bool
	// XRBase names the cluster-scoped managed resources of a legacy XR.
	XRBase         string
	ProviderConfig *fnv1alpha1.AWSProviderConfigRef
	Replicas       []replicaPlan
}

// replicaPlan is one replica's placement.
type replicaPlan struct {
	// Want is the placement the spec asks for. Its AllocationID is empty
	// while a new Elastic IP has not reported one.
	Want     placementIDs
	Allocate bool
	// Use is the placement composed now: Want once the provider has checked
	// it, else the one applied before (nothing changes until the check
	// passes), else nil and the Service or load balancer waits.
	Use *placementIDs
	// Zone and VPCID of the subnet in use (or about to be), from the spec
	// or the provider's check.
	Zone, VPCID string
	// Problems the provider found with Want; Waiting why Want is not used.
	Problems []string
	Waiting  string
	// PodIP of the replica's pod, for the Managed target registration.
	PodIP string
	// LoadBalancerName is its load balancer's and target group's name in
	// AWS (loadBalancerName).
	LoadBalancerName string
}

// planAWS places each replica, from the spec and what was observed.
func planAWS(r *relay, fin *fnv1alpha1.Input, o *awsObserved) (*awsPlan, error) {
	a := r.Spec.AWS
	if a == nil || (len(a.ElasticIPs) == 0 && len(a.Subnets) == 0) {
		return nil, nil
	}
	if o == nil {
		o = &awsObserved{}
	}
	p := &awsPlan{
		Region:         a.Region,
		Managed:        a.LoadBalancer == v1alpha1.LoadBalancerManaged,
		Legacy:         r.Legacy,
		XRBase:         r.XRBase,
		ProviderConfig: fin.AWSProviderConfig,
	}
	if p.Region == "" {
		p.Region = fin.AWSRegion
	}
	allocates := a.Allocate
	for _, e := range a.ElasticIPs {
		allocates = allocates || e.Allocate
	}
	if p.Region == "" && (allocates || p.Managed) {
		return nil, specError{aws: true, err: fmt.Errorf("spec.aws.region: needed to create AWS managed resources (Elastic IPs, load balancers): set it, or awsRegion in the function's Input")}
	}
	for i := range r.Replicas {
		p.Replicas = append(p.Replicas, planReplica(r, p, o, i))
	}
	return p, nil
}

// planReplica places replica i: what the spec wants, what is used while
// the provider has not checked it (or found it invalid), and the zone and
// VPC of the subnet in use.
func planReplica(r *relay, p *awsPlan, o *awsObserved, i int) replicaPlan {
	a := r.Spec.AWS
	rp := replicaPlan{}
	var zone string
	if len(a.Subnets) > 0 {
		rp.Want.SubnetID, rp.Allocate = a.Subnets[i%len(a.Subnets)], true
	} else {
		e := a.ElasticIPs[i]
		rp.Want = placementIDs{SubnetID: e.SubnetID, AllocationID: e.AllocationID}
		rp.Allocate, zone = e.Allocate, e.Zone
	}
	if rp.Allocate {
		rp.Want.AllocationID = o.Allocations[i]
	}
	rp.PodIP = o.PodIPs[podName(r, i)]
	rp.LoadBalancerName = loadBalancerName(r, i, o.Names[i])
	check := o.Checks[i]
	checked := check != nil && check.SubnetID == rp.Want.SubnetID && check.AllocationID == rp.Want.AllocationID
	switch {
	case rp.Want.AllocationID == "":
		rp.Waiting = fmt.Sprintf("replica %d waits for its Elastic IP %s to report an allocation ID", i, p.name(r, i))
	case !checked:
		rp.Waiting = fmt.Sprintf("replica %d waits for the provider to check %s and %s against AWS", i, rp.Want.SubnetID, rp.Want.AllocationID)
		if check != nil && check.SubnetID == rp.Want.SubnetID && check.Message != "" {
			rp.Waiting += ": " + check.Message
		}
	case len(check.Problems) > 0:
		rp.Problems = check.Problems
	default:
		rp.Use = &placementIDs{SubnetID: rp.Want.SubnetID, AllocationID: rp.Want.AllocationID}
	}
	if rp.Use == nil {
		if applied, ok := o.Applied[i]; ok {
			rp.Use = &applied
		}
	}
	// The zone and VPC of the subnet in use, or about to be.
	sub := rp.Want.SubnetID
	if rp.Use != nil {
		sub = rp.Use.SubnetID
	}
	rp.VPCID = a.VPCID
	if sub == rp.Want.SubnetID {
		rp.Zone = zone
	}
	if check != nil && check.SubnetID == sub {
		rp.Zone = cmp.Or(rp.Zone, check.Zone)
		rp.VPCID = cmp.Or(rp.VPCID, check.VPCID)
	}
	if rp.Zone == "" {
		// Pods pinned to a zone by the ProxyClass or spec.pod, as the
		// Tailscale operator's guide pins them.
		rp.Zone = r.Pod.NodeSelector[corev1.LabelTopologyZone]
	}
	if rp.Zone == "" && r.perReplicaZones() {
		// Its pods wait for the zone: started anywhere, they would
		// have to move.
		hint := "give the provider config AWS credentials (spec.aws) to look it up"
		if len(a.ElasticIPs) > 0 {
			hint = fmt.Sprintf("set spec.aws.elasticIPs[%d].zone, or %s", i, hint)
		}
		rp.Waiting = strings.TrimPrefix(rp.Waiting+"; ", "; ") + fmt.Sprintf("replica %d waits for the zone of subnet %s: %s", i, sub, hint)
	}
	return rp
}

// name is the name of replica i's AWS managed resources: R-i beside the
// PeerRelay for namespaced ones; the XR's own name for cluster-scoped ones,
// which must be unique across namespaces.
func (p *awsPlan) name(r *relay, i int) string {
	if p.Legacy {
		return replicaName(p.XRBase, i)
	}
	return replicaName(r.Base, i)
}

// loadBalancerName is replica i's name in AWS, for its load balancer and
// target group: at most 32 characters, unique per region and account, so
// it carries 64 bits of a hash of the PeerRelay's namespace and name. With
// the 32 bits of earlier versions a tenant could find offline a PeerRelay
// name of its own that gives another team's name, and AWS answers a
// target group created again with the same settings with the existing
// one. A replica whose load balancer was composed under its earlier name
// (composed, read back from the observed resources) keeps it: a load
// balancer cannot be renamed, and a new one is a new address.
func loadBalancerName(r *relay, i int, composed string) string {
	if composed != "" && composed == truncatedName(r.Base, 20)+"-"+shortHash(r.Namespace+"/"+r.Name)+"-"+strconv.Itoa(i) {
		return composed
	}
	sum := sha256.Sum256([]byte(r.Namespace + "/" + r.Name))
	return truncatedName(r.Base, 12) + "-" + hex.EncodeToString(sum[:8]) + "-" + strconv.Itoa(i)
}

// truncatedName is base cut to n characters, without a trailing dash.
func truncatedName(base string, n int) string {
	if len(base) > n {
		return strings.TrimRight(base[:n], "-")
	}
	return base
}

// problems lists every replica's AWS problems, each naming the replica.
func (p *awsPlan) problems() []string {
	if p == nil {
		return nil
	}
	var out []string
	for i, rp := range p.Replicas {
		for _, pr := range rp.Problems {
			out = append(out, fmt.Sprintf("replica %d: %s", i, pr))
		}
	}
	return out
}

// waits lists why replicas wait for their AWS placement.
func (p *awsPlan) waits() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, rp := range p.Replicas {
		if rp.Waiting != "" {
			out = append(out, rp.Waiting)
		}
	}
	return out
}
