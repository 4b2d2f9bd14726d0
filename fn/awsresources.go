package fn

import (
	"cmp"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// The Upbound AWS provider's managed resources, as plain objects: the
// function needs only their shape, not the provider's Go module. A v2 XR
// composes the namespaced .m. kinds, a legacy XR the cluster-scoped ones.
const upboundVersion = "v1beta1"

// awsResource is one managed resource of replica i.
func awsResource(r *relay, i int, service, kind string, forProvider map[string]any) *unstructured.Unstructured {
	p := r.AWS
	group := service + ".aws.m.upbound.io"
	if p.Legacy {
		group = service + ".aws.upbound.io"
	}
	md := map[string]any{"name": p.name(r, i), "labels": toAny(replicaLabels(r, i))}
	if !p.Legacy {
		md["namespace"] = r.Namespace
	}
	forProvider["region"] = p.Region
	spec := map[string]any{"forProvider": forProvider}
	if pc := p.ProviderConfig; pc != nil {
		ref := map[string]any{"name": pc.Name}
		if !p.Legacy {
			ref["kind"] = cmp.Or(pc.Kind, relayv1alpha1.ClusterProviderConfigKind)
		}
		spec["providerConfigRef"] = ref
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/" + upboundVersion,
		"kind":       kind,
		"metadata":   md,
		"spec":       spec,
	}}
}

// awsTags name the PeerRelay and replica on every AWS resource, so they
// can be told apart in the AWS console and billing. The relay tag is also
// what makes an Elastic IP or load balancer the namespace's to the
// provider, which uses no other.
func awsTags(r *relay, i int, name string) map[string]any {
	return map[string]any{
		"Name":                  name,
		relayv1alpha1.TagRelay:  r.Namespace + "/" + r.Name,
		"peerrelay.io/replica":  strconv.Itoa(i),
		"peerrelay.io/hostname": hostname(r.Hostname, i),
	}
}

// elasticIP allocates replica i's Elastic IP.
func elasticIP(r *relay, i int) *unstructured.Unstructured {
	return awsResource(r, i, "ec2", "EIP", map[string]any{
		"domain": "vpc",
		"tags":   awsTags(r, i, r.AWS.name(r, i)),
	})
}

// ref points at another of replica i's managed resources by name.
func ref(r *relay, i int) map[string]any {
	m := map[string]any{"name": r.AWS.name(r, i)}
	if !r.AWS.Legacy {
		m["namespace"] = r.Namespace
	}
	return m
}

// loadBalancer is replica i's internet-facing NLB with the replica's
// Elastic IP in its subnet. Cross-zone load balancing spreads traffic over
// the NLB's enabled zones only, and a pinned subnet enables one zone: the
// pod must run in that zone (perReplicaZones, the default when subnets are
// pinned), or the NLB has no healthy target.
func loadBalancer(r *relay, i int, use placementIDs) *unstructured.Unstructured {
	return awsResource(r, i, "elbv2", "LB", map[string]any{
		"name":                         r.AWS.Replicas[i].LoadBalancerName,
		"loadBalancerType":             "network",
		"internal":                     false,
		"ipAddressType":                "ipv4",
		"enableCrossZoneLoadBalancing": true,
		"subnetMapping":                []any{map[string]any{"subnetId": use.SubnetID, "allocationId": use.AllocationID}},
		"tags":                         awsTags(r, i, r.AWS.Replicas[i].LoadBalancerName),
	})
}

// targetGroup sends the relay's UDP port to the pod's IP, health-checked
// on containerboot's /healthz.
func targetGroup(r *relay, i int, vpcID string) *unstructured.Unstructured {
	return awsResource(r, i, "elbv2", "LBTargetGroup", map[string]any{
		"name":       r.AWS.Replicas[i].LoadBalancerName,
		"port":       int64(r.Port),
		"protocol":   "UDP",
		"targetType": "ip",
		"vpcId":      vpcID,
		"healthCheck": []any{map[string]any{
			"enabled":  true,
			"protocol": "HTTP",
			"port":     strconv.Itoa(healthCheckPort),
			"path":     "/healthz",
		}},
		"tags": awsTags(r, i, r.AWS.Replicas[i].LoadBalancerName),
	})
}

// listener forwards the relay's UDP port on the NLB to the target group.
func listener(r *relay, i int) *unstructured.Unstructured {
	return awsResource(r, i, "elbv2", "LBListener", map[string]any{
		"port":               int64(r.Port),
		"protocol":           "UDP",
		"loadBalancerArnRef": ref(r, i),
		"defaultAction":      []any{map[string]any{"type": "forward", "targetGroupArnRef": ref(r, i)}},
		"tags":               awsTags(r, i, r.AWS.Replicas[i].LoadBalancerName),
	})
}

// target registers the replica's pod IP with its target group.
func target(r *relay, i int, podIP string) *unstructured.Unstructured {
	u := awsResource(r, i, "elbv2", "LBTargetGroupAttachment", map[string]any{
		"targetGroupArnRef": ref(r, i),
		"targetId":          podIP,
		"port":              int64(r.Port),
	})
	// One registration per pod IP: a new IP is a new object.
	u.SetName(u.GetName() + "-" + ipLabel(podIP))
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// composeAWS adds replica i's AWS managed resources, each only once what it
// needs is known: the Elastic IP first; with Managed load balancers the LB
// and listener once the allocation is checked, the target group once the
// subnet's VPC is known, the registration once the pod has an IP.
func composeAWS(r *relay, i int) []keyedObject {
	rp := r.AWS.Replicas[i]
	var objs []keyedObject
	if rp.Allocate {
		objs = append(objs, keyedObject{eipKey(i), elasticIP(r, i)})
	}
	if !r.AWS.Managed {
		return objs
	}
	if rp.Use != nil {
		objs = append(objs, keyedObject{lbKey(i), loadBalancer(r, i, *rp.Use)})
	}
	if rp.VPCID != "" {
		objs = append(objs, keyedObject{targetGroupKey(i), targetGroup(r, i, rp.VPCID)})
		if rp.PodIP != "" {
			objs = append(objs, keyedObject{targetKey(i, rp.PodIP), target(r, i, rp.PodIP)})
		}
	}
	if rp.Use != nil && rp.VPCID != "" {
		objs = append(objs, keyedObject{listenerKey(i), listener(r, i)})
	}
	return objs
}
