package fn

import (
	"encoding/json"
	"errors"
	"maps"
	"path"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// The relay container and what containerboot reads from it: its config
// directory, its health check port, the auth key and config volumes.
const (
	containerName   = "tailscaled"
	configMountRoot = "/etc/tsconfig"
	healthCheckPort = 9002
	// metricsPortName names healthCheckPort once it serves metrics too.
	metricsPortName = "metrics"
	servicePortName = "peerrelay"
	authKeyVolume   = "authkey"
	configVolume    = "config"
	tmpVolume       = "tmp"
	// relayUID runs tailscaled unprivileged: in userspace networking it
	// needs no capabilities, only a writable /tmp for its socket.
	relayUID = 1000
)

// defaultSecurityContext is what the relay container runs with where the
// PeerRelay (spec.pod.securityContext) or its ProxyClass sets nothing.
func defaultSecurityContext() *corev1.SecurityContext {
	uid := int64(relayUID)
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// securityContext merges set over the defaults field by field, as a
// strategic merge patch does: a ProxyClass that sets only runAsUser keeps
// drop ALL, RuntimeDefault seccomp and no privilege escalation; a field set
// (false included) wins.
func securityContext(set *corev1.SecurityContext) *corev1.SecurityContext {
	base := defaultSecurityContext()
	if set == nil {
		return base
	}
	b, err1 := json.Marshal(base)
	p, err2 := json.Marshal(set)
	merged, err3 := strategicpatch.StrategicMergePatch(b, p, corev1.SecurityContext{})
	out := &corev1.SecurityContext{}
	if err := errors.Join(err1, err2, err3, json.Unmarshal(merged, out)); err != nil {
		return set // cannot happen for these types; the user's as it is
	}
	return out
}

func meta(r *relay, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: r.Namespace, Labels: labels}
}

func serviceAccount(r *relay) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(r, r.Base, commonLabels(r)),
	}
}

// role lets each pod's containerboot keep its device state in its own state
// Secret and record events on its pod (containerboot checks get, create and
// patch on events before it writes any); nothing else. It cannot create
// Secrets: create cannot be limited to names, and would let the relay create
// any Secret in the namespace. The provider creates each state Secret (see
// the RelayConfig's stateSecretName); one deleted under a running relay is
// made again by the provider, and until then a restarting containerboot
// exits and the pod backs off.
func role(r *relay) *rbacv1.Role {
	states := make([]string, r.Replicas)
	for i := range states {
		states[i] = replicaName(r.Base, i)
	}
	rules := []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "create", "patch"},
	}}
	if len(states) > 0 {
		rules = append([]rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: states, Verbs: []string{"get", "update", "patch"},
		}}, rules...)
	}
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(r, r.Base, commonLabels(r)),
		Rules:      rules,
	}
}

func roleBinding(r *relay) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(r, r.Base, commonLabels(r)),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: r.Base},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.Base, Namespace: r.Namespace}},
	}
}

// service is replica i's Service: a LoadBalancer for the cloud's load
// balancer controller, or with load balancers composed as managed resources
// a ClusterIP that nothing outside looks at.
func service(r *relay, i int) *corev1.Service {
	m := meta(r, replicaName(r.Base, i), replicaLabels(r, i))
	typ := corev1.ServiceTypeLoadBalancer
	var local corev1.ServiceExternalTrafficPolicy
	switch {
	case r.managedLoadBalancers() || r.nodeMode() != "":
		// No cloud load balancer: the user's annotations only. A hostPort
		// relay is reached on its node directly; a NodePort one only on the
		// node its pod runs on (the one advertised), which then keeps the
		// peers' own source addresses.
		typ = corev1.ServiceTypeClusterIP
		if r.nodeMode() == relayv1alpha1.NodeModeNodePort {
			typ, local = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
		}
		if s := r.Spec.Service; s != nil && len(s.Annotations) > 0 {
			m.Annotations = maps.Clone(s.Annotations)
		}
	default:
		m.Annotations = serviceAnnotations(r, i)
	}
	// Both families where the cluster has both: a dual-stack load balancer
	// then gets an IPv6 address too, and the replica advertises it.
	families := corev1.IPFamilyPolicyPreferDualStack
	if s := r.Spec.Service; s != nil && s.IPFamilyPolicy != nil {
		families = *s.IPFamilyPolicy
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			Type:                  typ,
			ExternalTrafficPolicy: local,
			IPFamilyPolicy:        &families,
			Selector:              map[string]string{labelPodName: podName(r, i)},
			Ports: []corev1.ServicePort{{
				Name: servicePortName, Protocol: corev1.ProtocolUDP,
				Port: r.Port, TargetPort: intstr.FromInt32(r.Port),
			}},
		},
	}
}

func authKeyMountPath() string { return relayv1alpha1.DefaultAuthKeyMountPath }

// replicaStatefulSet runs replica i alone, in zone when zone is set. One
// single-pod StatefulSet per replica means a pod template holds only its own
// replica's config and key mounts: scaling adds or removes whole
// StatefulSets and never changes, so never restarts, a running replica's
// pod. It is also how replicas land in different zones, each beside its own
// subnet's load balancer.
func replicaStatefulSet(r *relay, i int, zone string) *appsv1.StatefulSet {
	name := replicaName(r.Base, i)
	selector := selectorLabels(r)
	selector[labelReplica] = strconv.Itoa(i)
	pod := r.Pod
	podLabels := maps.Clone(pod.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, commonLabels(r)) // ours win: the selector depends on them
	maps.Copy(podLabels, selector)
	m := meta(r, name, commonLabels(r))
	if len(pod.StatefulSetLabels) > 0 {
		labels := maps.Clone(pod.StatefulSetLabels)
		maps.Copy(labels, m.Labels) // ours win: Crossplane and the selector depend on them
		m.Labels = labels
	}
	m.Annotations = maps.Clone(pod.StatefulSetAnnotations)
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(pod.Annotations)},
		Spec:       replicaPodSpec(r, i, zone),
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[annotationPodTemplate] = podTemplateHash(tmpl)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: m,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(1)),
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: selector},
			Template:            tmpl,
		},
	}
}

// replicaPodSpec is replica i's pod: the relay container with its volumes,
// and the pod settings (ProxyClass, then spec.pod) over our defaults.
func replicaPodSpec(r *relay, i int, zone string) corev1.PodSpec {
	pod := r.Pod
	volumes, mounts := replicaVolumes(r, i)
	return corev1.PodSpec{
		ServiceAccountName: r.Base,
		// containerboot reads TS_* variables, and a Service named like
		// ts-local-addr would inject TS_LOCAL_ADDR_PORT=udp://… and stop
		// it from starting.
		EnableServiceLinks:        ptr.To(false),
		Volumes:                   volumes,
		Containers:                []corev1.Container{relayContainer(r, i, mounts)},
		NodeSelector:              pod.NodeSelector,
		Tolerations:               pod.Tolerations,
		Affinity:                  inZone(pod.Affinity, zone),
		ImagePullSecrets:          pod.ImagePullSecrets,
		SecurityContext:           pod.PodSecurityContext,
		TopologySpreadConstraints: spread(r, zone),
		PriorityClassName:         pod.PriorityClassName,
		// The rest of what the Tailscale operator applies from a ProxyClass.
		NodeName:  pod.NodeName,
		DNSPolicy: pod.DNSPolicy,
		DNSConfig: pod.DNSConfig,
	}
}

// replicaVolumes are replica i's volumes and the relay container's mounts:
// its config Secret, a /tmp, and its auth key.
func replicaVolumes(r *relay, i int) ([]corev1.Volume, []corev1.VolumeMount) {
	name := replicaName(r.Base, i)
	volumes := []corev1.Volume{{Name: configVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: configSecretName(r.Base, i)},
	}}}
	mounts := []corev1.VolumeMount{{Name: configVolume, ReadOnly: true, MountPath: path.Join(configMountRoot, name)}}
	volumes = append(volumes, corev1.Volume{Name: tmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts = append(mounts, corev1.VolumeMount{Name: tmpVolume, MountPath: "/tmp"})
	// The key is needed only to log in: once the replica's state Secret
	// holds a device, the provider drops AuthKey from the config, and a
	// restarted pod must start even if the key Secret was deleted (or its
	// key was single-use and is spent). Hence an optional volume.
	if r.AuthKey != nil {
		volumes = append(volumes, corev1.Volume{Name: authKeyVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{
				SecretName: r.AuthKey.Name,
				Items:      []corev1.KeyToPath{{Key: r.AuthKey.Key, Path: r.AuthKey.Key}},
				Optional:   ptr.To(true),
			},
		}})
		return volumes, append(mounts, corev1.VolumeMount{Name: authKeyVolume, ReadOnly: true, MountPath: authKeyMountPath()})
	}
	// No key named: the provider mints one per replica (Tailscale API
	// access in its provider config) into R-i-authkey. The pod waits for
	// it.
	volumes = append(volumes, corev1.Volume{Name: authKeyVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: name + relayv1alpha1.MintedAuthKeySuffix, Optional: ptr.To(true)},
	}})
	return volumes, append(mounts, corev1.VolumeMount{Name: authKeyVolume, ReadOnly: true, MountPath: path.Join(authKeyMountPath(), name)})
}

// relayContainer is replica i's containerboot and tailscaled, with the pod
// settings' image, resources, security context and env over our defaults.
func relayContainer(r *relay, i int, mounts []corev1.VolumeMount) corev1.Container {
	name := replicaName(r.Base, i)
	pod := r.Pod
	c := corev1.Container{
		Name:  containerName,
		Image: r.Image,
		Env: []corev1.EnvVar{
			// POD_NAME and POD_UID let containerboot write events on its pod.
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			{Name: "TS_KUBE_SECRET", Value: name},
			{Name: "TS_EXPERIMENTAL_VERSIONED_CONFIG_DIR", Value: path.Join(configMountRoot, name)},
			// TS_LOCAL_ADDR_PORT stays containerboot's default, [::]:9002:
			// one dual-stack socket answers the probe on IPv4-only,
			// IPv6-only and dual-stack pods; 0.0.0.0 would fail IPv6-only.
			{Name: "TS_ENABLE_HEALTH_CHECK", Value: "true"},
			{Name: "TS_USERSPACE", Value: "true"},
		},
		Ports: []corev1.ContainerPort{
			{Name: "healthz", ContainerPort: healthCheckPort, Protocol: corev1.ProtocolTCP},
			{Name: servicePortName, ContainerPort: r.Port, Protocol: corev1.ProtocolUDP},
		},
		// Probed every second: containerboot is healthy about a second
		// after it starts, and a longer period leaves the pod unready that
		// much longer (docs/performance.md, apply → PeerRelayReady).
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(healthCheckPort),
		}}, PeriodSeconds: 1},
		VolumeMounts:    mounts,
		SecurityContext: securityContext(pod.SecurityContext),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		}},
		ImagePullPolicy: pod.ImagePullPolicy,
	}
	if pod.Resources != nil {
		c.Resources = *pod.Resources
	}
	if r.Spec.HostPort {
		// Bound on the node too: peers reach the relay at the node's
		// address (the provider advertises it).
		c.Ports[1].HostPort = r.Port
	}
	if r.metrics() {
		// containerboot serves /metrics beside /healthz on the same
		// socket; the port's name says so, for a PodMonitor to select.
		c.Env = append(c.Env, corev1.EnvVar{Name: "TS_ENABLE_METRICS", Value: "true"})
		c.Ports[0].Name = metricsPortName
	}
	if e, ok := gomaxprocs(c.Resources); ok && !slices.ContainsFunc(pod.Env, func(e corev1.EnvVar) bool { return e.Name == envGOMAXPROCS }) {
		c.Env = append(c.Env, e)
	}
	c.Env = append(c.Env, pod.Env...)
	return c
}

const envGOMAXPROCS = "GOMAXPROCS"

// gomaxprocs sizes tailscaled's Go runtime to the container's CPU, through
// the downward API, rounded up to whole CPUs: its limit when it has one,
// else its request (none without either). Go follows a CPU limit by itself
// but not a request: a relay requesting a tenth of a 96-core node would run
// 96 Ps and hold memory for each. An env GOMAXPROCS of the user's
// (spec.pod, a ProxyClass) wins.
func gomaxprocs(res corev1.ResourceRequirements) (corev1.EnvVar, bool) {
	var from string
	switch {
	case !res.Limits.Cpu().IsZero():
		from = "limits.cpu"
	case !res.Requests.Cpu().IsZero():
		from = "requests.cpu"
	default:
		return corev1.EnvVar{}, false
	}
	return corev1.EnvVar{Name: envGOMAXPROCS, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
		ContainerName: containerName, Resource: from, Divisor: resource.MustParse("1"),
	}}}, true
}

// spread is the user's topology spread constraints (spec.pod, a
// ProxyClass), else, for a replica no zone pins, a soft spread of the
// PeerRelay's pods over zones and nodes: one zone or node going down, or
// drained, should not take every replica. Soft (ScheduleAnyway), so a
// single-zone or single-node cluster still runs them all. The same for
// every replica count: a scale must not change, so restart, a running
// replica's pod template.
func spread(r *relay, zone string) []corev1.TopologySpreadConstraint {
	if len(r.Pod.TopologySpreadConstraints) > 0 || zone != "" {
		return r.Pod.TopologySpreadConstraints
	}
	sel := &metav1.LabelSelector{MatchLabels: selectorLabels(r)}
	return []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel},
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel},
	}
}

// inZone adds "in zone" to the pods' required node affinity, keeping the
// user's: every node selector term must also match the zone.
func inZone(a *corev1.Affinity, zone string) *corev1.Affinity {
	if zone == "" {
		return a
	}
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	out := &corev1.Affinity{}
	if a != nil {
		out = a.DeepCopy()
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	ns := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if ns == nil || len(ns.NodeSelectorTerms) == 0 {
		ns = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	for t := range ns.NodeSelectorTerms {
		ns.NodeSelectorTerms[t].MatchExpressions = append(ns.NodeSelectorTerms[t].MatchExpressions, req)
	}
	out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = ns
	return out
}
