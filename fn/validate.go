package fn

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/relay/static"
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
)

// validate checks a spec, collecting every problem so the user fixes them
// in one go. awsOnly reports whether every error concerns spec.aws, which
// the status reports as AWSConfigInvalid.
func validate(s *v1alpha1.PeerRelaySpec) (errs field.ErrorList, awsOnly bool) {
	spec := field.NewPath("spec")
	replicas := v1alpha1.DefaultReplicas
	if s.Replicas != nil {
		replicas = int(*s.Replicas)
		if replicas < 0 || replicas > v1alpha1.MaxReplicas {
			errs = append(errs, field.Invalid(spec.Child("replicas"), replicas, fmt.Sprintf("must be between 0 and %d (each replica is its own load balancer)", v1alpha1.MaxReplicas)))
		}
	}
	errs = append(errs, validateTags(spec.Child("tags"), s.Tags)...)
	errs = append(errs, validateHostnamePrefix(spec.Child("hostnamePrefix"), s.HostnamePrefix, replicas)...)
	errs = append(errs, validatePort(spec.Child("port"), s.Port)...)
	errs = append(errs, validateService(spec.Child("service"), s)...)
	errs = append(errs, validateAuthKeyRef(spec.Child("authKeySecretRef"), s.AuthKeySecretRef)...)
	if s.Pod != nil && s.Pod.Image != "" && strings.ContainsAny(s.Pod.Image, " \t\n") {
		errs = append(errs, field.Invalid(spec.Child("pod", "image"), s.Pod.Image, "must not contain white space"))
	}
	errs = append(errs, validateStaticEndpoints(spec.Child("staticEndpoints"), s.StaticEndpoints)...)
	if s.HostPort && ((s.Service != nil && s.Service.Type == corev1.ServiceTypeNodePort) || s.AWS != nil) {
		errs = append(errs, field.Forbidden(spec.Child("hostPort"), "hostPort advertises each pod's node: it goes with neither spec.service.type NodePort nor spec.aws"))
	}
	if s.HostPort {
		errs = append(errs, validateHostPort(spec.Child("port"), s.Port)...)
		if s.Service != nil {
			errs = append(errs, validateHostPort(spec.Child("service", "port"), s.Service.Port)...)
		}
	}
	if b := s.DisruptionBudget; b != nil && b.MaxUnavailable != nil {
		errs = append(errs, validateMaxUnavailable(spec.Child("disruptionBudget", "maxUnavailable"), *b.MaxUnavailable)...)
	}
	nonAWS := len(errs)
	errs = append(errs, validateAWS(spec.Child("aws"), s, replicas)...)
	return errs, nonAWS == 0 && len(errs) > 0
}

// validateTags checks spec.tags: tailnet tags, each once.
func validateTags(path *field.Path, tags []v1alpha1.Tag) (errs field.ErrorList) {
	seen := map[v1alpha1.Tag]bool{}
	for i, t := range tags {
		p := path.Index(i)
		if !tagPattern.MatchString(string(t)) {
			errs = append(errs, field.Invalid(p, t, fmt.Sprintf("must match %s, for example tag:k8s", tagPattern)))
		}
		if seen[t] {
			errs = append(errs, field.Duplicate(p, t))
		}
		seen[t] = true
	}
	return errs
}

// validateHostnamePrefix checks spec.hostnamePrefix: a DNS label, short
// enough for the last replica's hostname.
func validateHostnamePrefix(path *field.Path, p string, replicas int) field.ErrorList {
	switch {
	case p == "":
		return nil
	case !hostnamePattern.MatchString(p):
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("must match %s (lower-case letters, digits and dashes)", hostnamePattern))}
	}
	if n := len(p) + 1 + len(strconv.Itoa(max(replicas-1, 0))); n > 63 {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("makes hostnames of %d characters (%s-%d); the limit is 63", n, p, replicas-1))}
	}
	return nil
}

// validateService checks spec.service: its port, type and IP families.
func validateService(path *field.Path, s *v1alpha1.PeerRelaySpec) (errs field.ErrorList) {
	svc := s.Service
	if svc == nil {
		return nil
	}
	errs = append(errs, validatePort(path.Child("port"), svc.Port)...)
	if s.Port != nil && svc.Port != nil && *s.Port != *svc.Port {
		errs = append(errs, field.Invalid(path.Child("port"), *svc.Port, fmt.Sprintf("spec.port is %d: the two name the same UDP port, set one of them", *s.Port)))
	}
	switch svc.Type {
	case "", corev1.ServiceTypeLoadBalancer:
	case corev1.ServiceTypeNodePort:
		if s.AWS != nil {
			errs = append(errs, field.Forbidden(path.Child("type"), "NodePort advertises each pod's node: it does not go with spec.aws (load balancers)"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), svc.Type, []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}))
	}
	if p := svc.IPFamilyPolicy; p != nil && !slices.Contains(ipFamilyPolicies, *p) {
		errs = append(errs, field.NotSupported(path.Child("ipFamilyPolicy"), *p, ipFamilyPolicies))
	}
	return errs
}

// validateAuthKeyRef checks spec.authKeySecretRef: a Secret name and key.
func validateAuthKeyRef(path *field.Path, r *v1alpha1.SecretKeyRef) (errs field.ErrorList) {
	if r == nil {
		return nil
	}
	for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), r.Name, "not a valid Secret name: "+msg))
	}
	if r.Key != "" {
		for _, msg := range validation.IsConfigMapKey(r.Key) {
			errs = append(errs, field.Invalid(path.Child("key"), r.Key, "not a valid Secret key: "+msg))
		}
	}
	return errs
}

// overlayPorts are the UDP ports cluster networking listens on at every
// node: a hostPort relay there would take them from the node.
var overlayPorts = []int32{4789, 6081, 8472, 51820}

// validateHostPort refuses a port a hostPort relay may not bind on the
// node: a privileged one, or cluster networking's.
func validateHostPort(path *field.Path, p *int32) field.ErrorList {
	switch {
	case p == nil:
		return nil
	case *p < 1024:
		return field.ErrorList{field.Invalid(path, *p, "spec.hostPort binds it on the node: use a port of 1024 or above")}
	case slices.Contains(overlayPorts, *p):
		return field.ErrorList{field.Invalid(path, *p, "spec.hostPort binds it on the node, where cluster networking uses it (4789 VXLAN, 6081 Geneve, 8472 Flannel VXLAN, 51820 WireGuard): choose another")}
	}
	return nil
}

var ipFamilyPolicies = []corev1.IPFamilyPolicy{corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack}

// validateMaxUnavailable refuses a budget that blocks every drain (0, 0%)
// and what the disruption controller cannot read.
func validateMaxUnavailable(path *field.Path, v intstr.IntOrString) field.ErrorList {
	const msg = "must be at least 1 or a percentage from 1% to 100%: 0 would block every node drain"
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return field.ErrorList{field.Invalid(path, v.IntVal, msg)}
		}
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if !strings.HasSuffix(v.StrVal, "%") || err != nil || n < 1 || n > 100 {
		return field.ErrorList{field.Invalid(path, v.StrVal, msg)}
	}
	return nil
}

func validatePort(path *field.Path, port *int32) (errs field.ErrorList) {
	if port == nil {
		return nil
	}
	for _, msg := range validation.IsValidPortNum(int(*port)) {
		errs = append(errs, field.Invalid(path, *port, "a UDP port "+msg))
	}
	return errs
}

func validateStaticEndpoints(path *field.Path, eps []string) (errs field.ErrorList) {
	seen := map[netip.AddrPort]bool{}
	for i, ep := range eps {
		p := path.Index(i)
		ap, err := netip.ParseAddrPort(ep)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, ep, "must be ip:port, for example 203.0.113.7:41641 or [2001:db8::1]:41641 (hostnames are not allowed: tailscaled advertises addresses)"))
		case ap.Port() == 0:
			errs = append(errs, field.Invalid(p, ep, "needs a port between 1 and 65535"))
		case !static.AddrAllowed(ap.Addr()):
			errs = append(errs, field.Invalid(p, ep, "not a unicast address peers can reach"))
		case seen[ap]:
			errs = append(errs, field.Duplicate(p, ep))
		}
		if err == nil {
			seen[ap] = true
		}
	}
	return errs
}

func validateAWS(path *field.Path, s *v1alpha1.PeerRelaySpec, replicas int) (errs field.ErrorList) {
	a := s.AWS
	if a == nil {
		return nil
	}
	eips := a.ElasticIPs
	if len(eips) > 0 && len(eips) < replicas {
		errs = append(errs, field.Invalid(path.Child("elasticIPs"), fmt.Sprintf("%d entries", len(eips)), fmt.Sprintf("spec.replicas is %d: give one Elastic IP per replica", replicas)))
	}
	seen := map[string]int{}
	for i, e := range eips {
		p := path.Child("elasticIPs").Index(i)
		switch {
		case e.Allocate && e.AllocationID != "":
			errs = append(errs, field.Forbidden(p.Child("allocationID"), "set allocationID or allocate: true, not both"))
		case !e.Allocate && e.AllocationID == "":
			errs = append(errs, field.Required(p.Child("allocationID"), "needs allocationID (an existing Elastic IP) or allocate: true (a new one)"))
		case e.Allocate:
		case !allocationIDPattern.MatchString(e.AllocationID):
			errs = append(errs, field.Invalid(p.Child("allocationID"), e.AllocationID, "must match "+allocationIDPattern.String()))
		default:
			if j, dup := seen[e.AllocationID]; dup {
				errs = append(errs, field.Invalid(p.Child("allocationID"), e.AllocationID, fmt.Sprintf("already used by spec.aws.elasticIPs[%d]: an Elastic IP can front one replica only", j)))
			}
			seen[e.AllocationID] = i
		}
		if !subnetIDPattern.MatchString(e.SubnetID) {
			errs = append(errs, field.Invalid(p.Child("subnetID"), e.SubnetID, "must match "+subnetIDPattern.String()))
		}
		if e.Zone != "" && !zonePattern.MatchString(e.Zone) {
			errs = append(errs, field.Invalid(p.Child("zone"), e.Zone, "must be an availability zone such as eu-west-1a"))
		}
	}
	errs = append(errs, validateSubnets(path, a)...)
	if a.Region != "" && !regionPattern.MatchString(a.Region) {
		errs = append(errs, field.Invalid(path.Child("region"), a.Region, "must be an AWS region such as eu-west-1"))
	}
	if a.VPCID != "" && !vpcIDPattern.MatchString(a.VPCID) {
		errs = append(errs, field.Invalid(path.Child("vpcID"), a.VPCID, "must match "+vpcIDPattern.String()))
	}
	pinned := len(eips) > 0 || len(a.Subnets) > 0
	errs = append(errs, pinnedMode(path.Child("loadBalancer"), a.LoadBalancer, v1alpha1.LoadBalancerController, v1alpha1.LoadBalancerManaged, pinned,
		"Managed needs spec.aws.elasticIPs or spec.aws.subnets: each replica's load balancer is placed in its subnet with its Elastic IP")...)
	errs = append(errs, pinnedMode(path.Child("zonePlacement"), a.ZonePlacement, v1alpha1.ZonePlacementAny, v1alpha1.ZonePlacementPerReplica, pinned,
		"PerReplica needs spec.aws.elasticIPs or spec.aws.subnets: a replica runs in the zone of its subnet")...)
	return errs
}

// validateSubnets checks spec.aws.subnets, the short form of elasticIPs
// with allocate: true.
func validateSubnets(path *field.Path, a *v1alpha1.AWSSpec) (errs field.ErrorList) {
	switch {
	case len(a.Subnets) > 0 && len(a.ElasticIPs) > 0:
		errs = append(errs, field.Forbidden(path.Child("subnets"), "set spec.aws.subnets or spec.aws.elasticIPs, not both (subnets with allocate: true generates the Elastic IPs)"))
	case len(a.Subnets) > 0 && !a.Allocate:
		errs = append(errs, field.Invalid(path.Child("allocate"), a.Allocate, "must be true with spec.aws.subnets: each replica gets a new Elastic IP in subnets[i mod len(subnets)]"))
	case len(a.Subnets) == 0 && a.Allocate:
		errs = append(errs, field.Invalid(path.Child("allocate"), a.Allocate, "needs spec.aws.subnets (or use spec.aws.elasticIPs[i].allocate)"))
	}
	seen := map[string]int{}
	for i, sn := range a.Subnets {
		p := path.Child("subnets").Index(i)
		if !subnetIDPattern.MatchString(sn) {
			errs = append(errs, field.Invalid(p, sn, "must match "+subnetIDPattern.String()))
		} else if _, dup := seen[sn]; dup {
			errs = append(errs, field.Duplicate(p, sn))
		}
		seen[sn] = i
	}
	return errs
}

// minImageVersion is the oldest tailscale image whose tailscaled reads the
// relay's config file: RelayServerPort and RelayServerStaticEndpoints came
// to the config file with capability version 142 (v1.102). containerboot
// reads the newest cap-<N>.hujson not newer than its own; an older one
// would find none, or refuse the unknown fields, and exit.
var minImageVersion = version.MustParseGeneric("1.102.0")

// imageTooOld says why image cannot run a relay, or "": only a tailscale
// image whose tag is a version can be judged.
func imageTooOld(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	repo, tag := ref, ""
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		repo, tag = ref[:i], ref[i+1:]
	}
	if path.Base(repo) != "tailscale" || tag == "" {
		return ""
	}
	v, err := version.ParseGeneric(tag)
	if err != nil || !v.LessThan(minImageVersion) {
		return ""
	}
	return fmt.Sprintf("image %s is too old: a peer relay's config file needs tailscale v%s or later (set spec.pod.image, the ProxyClass's tailscaleContainer.image, or the function Input's image)", image, minImageVersion)
}

// pinnedMode checks a two-valued mode of spec.aws: unset or def, or
// needsPins, which only replicas pinned to subnets (pinned) can have.
func pinnedMode[M ~string](path *field.Path, m, def, needsPins M, pinned bool, why string) field.ErrorList {
	switch m {
	case "", def:
		return nil
	case needsPins:
		if !pinned {
			return field.ErrorList{field.Invalid(path, m, why)}
		}
		return nil
	}
	return field.ErrorList{field.NotSupported(path, m, []M{def, needsPins})}
}
