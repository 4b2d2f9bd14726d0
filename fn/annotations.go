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
		// One NLB per replica: cross-zone keeps it answering when the pod's
		// zone is not the client's.
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
