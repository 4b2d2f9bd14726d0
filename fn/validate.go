package fn

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// The same rules the CRD schema carries, enforced here too: `crossplane
// render`, old XRs and legacy claims may never have met the API server's
// validation.
var (
	tagPattern          = regexp.MustCompile(`^tag:[a-zA-Z][a-zA-Z0-9-]*$`)
	hostnamePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,61}$`)
	allocationIDPattern = regexp.MustCompile(`^eipalloc-[0-9a-f]+$`)
	subnetIDPattern     = regexp.MustCompile(`^subnet-[0-9a-f]+$`)
	vpcIDPattern        = regexp.MustCompile(`^vpc-[0-9a-f]+$`)
	regionPattern       = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	zonePattern         = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`)
	secretNamePattern   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	secretKeyPattern    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

// pinnedAnnotations are set from spec.aws.elasticIPs; a user annotation with
// the same key would silently lose, so it is refused instead.
var pinnedAnnotations = []string{annotationEIPAllocations, annotationSubnets}

// fieldErrors collects every problem so the user fixes them in one go.
type fieldErrors []string

func (e *fieldErrors) add(field, format string, a ...any) {
	*e = append(*e, field+": "+fmt.Sprintf(format, a...))
}

// addf adds a message that names its fields itself.
func (e *fieldErrors) addf(format string, a ...any) { *e = append(*e, fmt.Sprintf(format, a...)) }

func (e fieldErrors) Error() string { return strings.Join(e, "; ") }

// validate checks a spec. awsOnly reports whether every error concerns
// spec.aws, which the status reports as AWSConfigInvalid.
func validate(s *v1alpha1.PeerRelaySpec) (errs fieldErrors, awsOnly bool) {
	replicas := v1alpha1.DefaultReplicas
	if s.Replicas != nil {
		replicas = int(*s.Replicas)
		if replicas < 0 || replicas > v1alpha1.MaxReplicas {
			errs.add("spec.replicas", "must be between 0 and %d, got %d (each replica is its own load balancer)", v1alpha1.MaxReplicas, replicas)
		}
	}
	seen := map[v1alpha1.Tag]bool{}
	for i, t := range s.Tags {
		if !tagPattern.MatchString(string(t)) {
			errs.add(fmt.Sprintf("spec.tags[%d]", i), "%q must match %s, for example tag:k8s", t, tagPattern)
		}
		if seen[t] {
			errs.add(fmt.Sprintf("spec.tags[%d]", i), "%q is listed twice", t)
		}
		seen[t] = true
	}
	if p := s.HostnamePrefix; p != "" {
		if !hostnamePattern.MatchString(p) {
			errs.add("spec.hostnamePrefix", "%q must match %s (lower-case letters, digits and dashes)", p, hostnamePattern)
		} else if n := len(p) + 1 + len(strconv.Itoa(max(replicas-1, 0))); n > 63 {
			errs.add("spec.hostnamePrefix", "%q makes hostnames of %d characters (%s-%d); the limit is 63", p, n, p, replicas-1)
		}
	}
	if s.Port != nil && (*s.Port < 1 || *s.Port > 65535) {
		errs.add("spec.port", "must be a UDP port between 1 and 65535, got %d", *s.Port)
	}
	if r := s.AuthKeySecretRef; r != nil {
		if !secretNamePattern.MatchString(r.Name) || len(r.Name) > 253 {
			errs.add("spec.authKeySecretRef.name", "%q is not a valid Secret name", r.Name)
		}
		if r.Key != "" && !secretKeyPattern.MatchString(r.Key) {
			errs.add("spec.authKeySecretRef.key", "%q is not a valid Secret key (letters, digits, '-', '_', '.')", r.Key)
		}
	}
	if s.Pod != nil && s.Pod.Image != "" && strings.ContainsAny(s.Pod.Image, " \t\n") {
		errs.add("spec.pod.image", "%q must not contain white space", s.Pod.Image)
	}
	validateStaticEndpoints(&errs, s.StaticEndpoints)
	nonAWS := len(errs)
	validateAWS(&errs, s, replicas)
	return errs, nonAWS == 0 && len(errs) > 0
}

func validateStaticEndpoints(errs *fieldErrors, eps []string) {
	seen := map[netip.AddrPort]bool{}
	for i, ep := range eps {
		field := fmt.Sprintf("spec.staticEndpoints[%d]", i)
		ap, err := netip.ParseAddrPort(ep)
		switch {
		case err != nil:
			errs.add(field, "%q must be ip:port, for example 203.0.113.7:41641 or [2001:db8::1]:41641 (hostnames are not allowed: tailscaled advertises addresses)", ep)
		case ap.Port() == 0:
			errs.add(field, "%q needs a port between 1 and 65535", ep)
		case !ap.Addr().IsGlobalUnicast() && !ap.Addr().IsPrivate():
			errs.add(field, "%q is not a unicast address peers can reach", ep)
		case seen[ap]:
			errs.add(field, "%q is listed twice", ep)
		}
		if err == nil {
			seen[ap] = true
		}
	}
}

func validateAWS(errs *fieldErrors, s *v1alpha1.PeerRelaySpec, replicas int) {
	a := s.AWS
	if a == nil {
		return
	}
	eips := a.ElasticIPs
	if len(eips) > 0 && len(eips) < replicas {
		errs.addf("spec.aws.elasticIPs has %d entries but spec.replicas is %d: give one Elastic IP per replica", len(eips), replicas)
	}
	seen := map[string]int{}
	for i, e := range eips {
		field := fmt.Sprintf("spec.aws.elasticIPs[%d]", i)
		switch {
		case e.Allocate && e.AllocationID != "":
			errs.add(field, "set allocationID or allocate: true, not both")
		case !e.Allocate && e.AllocationID == "":
			errs.add(field, "needs allocationID (an existing Elastic IP) or allocate: true (a new one)")
		case e.Allocate:
		case !allocationIDPattern.MatchString(e.AllocationID):
			errs.add(field+".allocationID", "%q must match %s", e.AllocationID, allocationIDPattern)
		default:
			if j, dup := seen[e.AllocationID]; dup {
				errs.add(field+".allocationID", "%q is already used by spec.aws.elasticIPs[%d]: an Elastic IP can front one replica only", e.AllocationID, j)
			}
			seen[e.AllocationID] = i
		}
		if !subnetIDPattern.MatchString(e.SubnetID) {
			errs.add(field+".subnetID", "%q must match %s", e.SubnetID, subnetIDPattern)
		}
		if e.Zone != "" && !zonePattern.MatchString(e.Zone) {
			errs.add(field+".zone", "%q must be an availability zone such as eu-west-1a", e.Zone)
		}
	}
	validateSubnets(errs, a)
	if a.Region != "" && !regionPattern.MatchString(a.Region) {
		errs.add("spec.aws.region", "%q must be an AWS region such as eu-west-1", a.Region)
	}
	if a.VPCID != "" && !vpcIDPattern.MatchString(a.VPCID) {
		errs.add("spec.aws.vpcID", "%q must match %s", a.VPCID, vpcIDPattern)
	}
	pinned := len(eips) > 0 || len(a.Subnets) > 0
	switch a.LoadBalancer {
	case "", v1alpha1.LoadBalancerController:
	case v1alpha1.LoadBalancerManaged:
		if !pinned {
			errs.add("spec.aws.loadBalancer", "Managed needs spec.aws.elasticIPs or spec.aws.subnets: each replica's load balancer is placed in its subnet with its Elastic IP")
		}
	default:
		errs.add("spec.aws.loadBalancer", "%q must be Controller or Managed", a.LoadBalancer)
	}
	switch a.ZonePlacement {
	case "", v1alpha1.ZonePlacementAny:
	case v1alpha1.ZonePlacementPerReplica:
		if !pinned {
			errs.add("spec.aws.zonePlacement", "PerReplica needs spec.aws.elasticIPs or spec.aws.subnets: a replica runs in the zone of its subnet")
		}
	default:
		errs.add("spec.aws.zonePlacement", "%q must be Any or PerReplica", a.ZonePlacement)
	}
	if pinned && s.Service != nil {
		for _, k := range pinnedAnnotations {
			if _, ok := s.Service.Annotations[k]; ok {
				errs.add("spec.service.annotations["+k+"]", "conflicts with spec.aws.elasticIPs, which sets it per replica: remove the annotation")
			}
		}
	}
}

// validateSubnets checks spec.aws.subnets, the short form of elasticIPs
// with allocate: true.
func validateSubnets(errs *fieldErrors, a *v1alpha1.AWSSpec) {
	switch {
	case len(a.Subnets) > 0 && len(a.ElasticIPs) > 0:
		errs.addf("spec.aws.subnets and spec.aws.elasticIPs: set one, not both (subnets with allocate: true generates the Elastic IPs)")
	case len(a.Subnets) > 0 && !a.Allocate:
		errs.add("spec.aws.allocate", "must be true with spec.aws.subnets: each replica gets a new Elastic IP in subnets[i mod len(subnets)]")
	case len(a.Subnets) == 0 && a.Allocate:
		errs.add("spec.aws.allocate", "needs spec.aws.subnets (or use spec.aws.elasticIPs[i].allocate)")
	}
	seen := map[string]int{}
	for i, sn := range a.Subnets {
		field := fmt.Sprintf("spec.aws.subnets[%d]", i)
		if !subnetIDPattern.MatchString(sn) {
			errs.add(field, "%q must match %s", sn, subnetIDPattern)
		} else if j, dup := seen[sn]; dup {
			errs.add(field, "%q is already spec.aws.subnets[%d]", sn, j)
		}
		seen[sn] = i
	}
}
