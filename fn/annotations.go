package fn

import (
	"maps"
	"strconv"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
)

// Load balancer annotations. AWS's are read by the AWS Load Balancer
// Controller; Azure's by the Azure cloud provider. Each cloud ignores the
// other's, so by default both are set, as the Tailscale operator does.
const (
	annotationEIPAllocations = "service.beta.kubernetes.io/aws-load-balancer-eip-allocations"
	annotationSubnets        = "service.beta.kubernetes.io/aws-load-balancer-subnets"
	annotationLBAttributes   = "service.beta.kubernetes.io/aws-load-balancer-attributes"
	crossZoneOn              = "load_balancing.cross_zone.enabled=true"
)

var awsAnnotations = map[string]string{
	"service.beta.kubernetes.io/aws-load-balancer-type":                 "external",
	"service.beta.kubernetes.io/aws-load-balancer-nlb-target-type":      "ip",
	"service.beta.kubernetes.io/aws-load-balancer-scheme":               "internet-facing",
	"service.beta.kubernetes.io/aws-load-balancer-ip-address-type":      "ipv4",
	"service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol": "http",
	"service.beta.kubernetes.io/aws-load-balancer-healthcheck-port":     strconv.Itoa(healthCheckPort),
	"service.beta.kubernetes.io/aws-load-balancer-healthcheck-path":     "/healthz",
}

var azureAnnotations = map[string]string{
	"service.beta.kubernetes.io/azure-load-balancer-internal": "false",
}

// serviceAnnotations layers, lowest first: cloud defaults, the user's
// spec.service.annotations, then replica i's Elastic IP pinning.
func serviceAnnotations(r *relay, i int) map[string]string {
	a := map[string]string{}
	aws := r.Cloud == "" || r.Cloud == fnv1alpha1.CloudAWS
	if aws {
		maps.Copy(a, awsAnnotations)
	}
	if r.Cloud == "" || r.Cloud == fnv1alpha1.CloudAzure {
		maps.Copy(a, azureAnnotations)
	}
	if s := r.Spec.Service; s != nil {
		maps.Copy(a, s.Annotations)
	}
	if _, set := a[annotationLBAttributes]; aws && !set {
		// One NLB per replica: cross-zone lets each of its zones' addresses
		// reach the pod. It does not reach zones the NLB has not enabled:
		// a pinned subnet enables one, and the pod runs there.
		a[annotationLBAttributes] = crossZoneOn
	}
	if r.AWS != nil {
		if use := r.AWS.Replicas[i].Use; use != nil {
			a[annotationEIPAllocations] = use.AllocationID
			a[annotationSubnets] = use.SubnetID
		}
	}
	return a
}

// pinnedAnnotations are set from spec.aws.elasticIPs or subnets, per
// replica; a user annotation with the same key is ignored, as the
// Tailscale operator ignores it, with a warning.
var pinnedAnnotations = []string{annotationEIPAllocations, annotationSubnets}

// ignoredAnnotations are the user's Service annotations that Elastic IP
// pinning overrides.
func ignoredAnnotations(r *relay) []string {
	a := r.Spec.AWS
	if a == nil || (len(a.ElasticIPs) == 0 && len(a.Subnets) == 0) || r.Spec.Service == nil {
		return nil
	}
	var out []string
	for _, k := range pinnedAnnotations {
		if _, ok := r.Spec.Service.Annotations[k]; ok {
			out = append(out, k)
		}
	}
	return out
}
