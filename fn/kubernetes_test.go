package fn

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

func TestRole(t *testing.T) {
	events := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "create", "patch"}}
	cases := map[string]struct {
		reason   string
		replicas int
		want     []rbacv1.PolicyRule
	}{
		"TwoReplicas": {
			reason:   "Each replica may read and write its own state Secret, by name, and record events; no create on Secrets.",
			replicas: 2,
			want: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
				ResourceNames: []string{"my-relay-0", "my-relay-1"}, Verbs: []string{"get", "update", "patch"}}, events},
		},
		"Zero": {
			reason: "Scaled to zero, no Secret rule at all: an empty resourceNames would grant every Secret.",
			want:   []rbacv1.PolicyRule{events},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := role(testRelay(t, func(r *relay) { r.Replicas = tc.replicas }))
			if diff := cmp.Diff(tc.want, got.Rules); diff != "" {
				t.Errorf("%s\nrules (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func gomaxprocsFrom(res string) corev1.EnvVar {
	return corev1.EnvVar{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
		ContainerName: containerName, Resource: res, Divisor: resource.MustParse("1")}}}
}

func TestService(t *testing.T) {
	base := func(typ corev1.ServiceType, annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-relay-1", Namespace: "team-a", Labels: labels1, Annotations: annotations},
			Spec: corev1.ServiceSpec{
				Type:           typ,
				IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack),
				Selector:       map[string]string{labelPodName: "my-relay-1-0"},
				Ports: []corev1.ServicePort{{Name: servicePortName, Protocol: corev1.ProtocolUDP,
					Port: 41641, TargetPort: intstr.FromInt32(41641)}},
			},
		}
	}
	both := map[string]string{annotationLBAttributes: crossZoneOn}
	for k, v := range awsAnnotations {
		both[k] = v
	}
	for k, v := range azureAnnotations {
		both[k] = v
	}
	cases := map[string]struct {
		reason string
		r      *relay
		want   *corev1.Service
	}{
		"Default": {
			reason: "With no cloud named, both AWS's and Azure's annotations, as the Tailscale operator sets them.",
			r:      testRelay(t),
			want:   base(corev1.ServiceTypeLoadBalancer, both),
		},
		"Azure": {
			reason: "On Azure, Azure's annotations only.",
			r:      testRelay(t, func(r *relay) { r.Cloud = fnv1alpha1.CloudAzure }),
			want:   base(corev1.ServiceTypeLoadBalancer, azureAnnotations),
		},
		"UserAnnotationsAndPort": {
			reason: "The user's annotations win over the cloud defaults; the port is the relay's on both sides.",
			r: testRelay(t, func(r *relay) {
				r.Cloud, r.Port = fnv1alpha1.CloudAzure, 7001
				r.Spec.Service = &v1alpha1.ServiceSpec{Annotations: map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true", "x": "y"}}
			}),
			want: func() *corev1.Service {
				s := base(corev1.ServiceTypeLoadBalancer, map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "true", "x": "y"})
				s.Spec.Ports[0].Port, s.Spec.Ports[0].TargetPort = 7001, intstr.FromInt32(7001)
				return s
			}(),
		},
		"NodePort": {
			reason: "spec.service.type NodePort: no cloud annotations, and only the pod's node answers (externalTrafficPolicy Local), keeping peers' addresses.",
			r: testRelay(t, func(r *relay) {
				r.Spec.Service = &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Annotations: map[string]string{"x": "y"}}
			}),
			want: func() *corev1.Service {
				s := base(corev1.ServiceTypeNodePort, map[string]string{"x": "y"})
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				return s
			}(),
		},
		"HostPort": {
			reason: "spec.hostPort: the relay is reached on its node directly; its Service is a ClusterIP without cloud annotations.",
			r:      testRelay(t, func(r *relay) { r.Spec.HostPort = true }),
			want:   base(corev1.ServiceTypeClusterIP, nil),
		},
		"SingleStack": {
			reason: "spec.service.ipFamilyPolicy replaces the PreferDualStack default.",
			r: testRelay(t, func(r *relay) {
				r.Cloud = fnv1alpha1.CloudAzure
				r.Spec.Service = &v1alpha1.ServiceSpec{IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack)}
			}),
			want: func() *corev1.Service {
				s := base(corev1.ServiceTypeLoadBalancer, azureAnnotations)
				s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
				return s
			}(),
		},
		"ElasticIP": {
			reason: "A replica whose placement the provider checked is pinned to its subnet and Elastic IP, whatever the user's annotations say.",
			r: testRelay(t, func(r *relay) {
				r.Cloud = fnv1alpha1.CloudAWS
				r.AWS = &awsPlan{Replicas: []replicaPlan{{}, {Use: &placementIDs{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b"}}}}
			}),
			want: func() *corev1.Service {
				a := map[string]string{annotationLBAttributes: crossZoneOn, annotationSubnets: "subnet-0b", annotationEIPAllocations: "eipalloc-0b"}
				for k, v := range awsAnnotations {
					a[k] = v
				}
				return base(corev1.ServiceTypeLoadBalancer, a)
			}(),
		},
		"Managed": {
			reason: "With load balancers composed as managed resources, a ClusterIP Service with the user's annotations only.",
			r: testRelay(t, func(r *relay) {
				r.Spec.AWS = &v1alpha1.AWSSpec{LoadBalancer: v1alpha1.LoadBalancerManaged}
				r.Spec.Service = &v1alpha1.ServiceSpec{Annotations: map[string]string{"x": "y"}}
			}),
			want: base(corev1.ServiceTypeClusterIP, map[string]string{"x": "y"}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, service(tc.r, 1)); diff != "" {
				t.Errorf("%s\nService (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReplicaStatefulSet(t *testing.T) {
	// want is replica 1 of testRelay as composed by default.
	want := func() *appsv1.StatefulSet {
		selector := map[string]string{labelName: appName, labelInstance: "my-relay", labelReplica: "1"}
		common := map[string]string{labelName: appName, labelInstance: "my-relay", labelManagedBy: "function-peerrelay"}
		return &appsv1.StatefulSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-relay-1", Namespace: "team-a", Labels: common},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To[int32](1),
				ServiceName:         "my-relay-1",
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels1},
					Spec: corev1.PodSpec{
						ServiceAccountName: "my-relay",
						EnableServiceLinks: ptr.To(false),
						TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
							{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelName: appName, labelInstance: "my-relay"}}},
							{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelName: appName, labelInstance: "my-relay"}}},
						},
						Volumes: []corev1.Volume{
							{Name: configVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "my-relay-1-config"}}},
							{Name: tmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
							{Name: authKeyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
								SecretName: "ts-auth", Items: []corev1.KeyToPath{{Key: "authkey", Path: "authkey"}}, Optional: ptr.To(true)}}},
						},
						Containers: []corev1.Container{{
							Name:  containerName,
							Image: v1alpha1.DefaultImage,
							Env: []corev1.EnvVar{
								{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
								{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
								{Name: "TS_KUBE_SECRET", Value: "my-relay-1"},
								{Name: "TS_EXPERIMENTAL_VERSIONED_CONFIG_DIR", Value: "/etc/tsconfig/my-relay-1"},
								{Name: "TS_ENABLE_HEALTH_CHECK", Value: "true"},
								{Name: "TS_USERSPACE", Value: "true"},
								gomaxprocsFrom("requests.cpu"),
							},
							Ports: []corev1.ContainerPort{
								{Name: "healthz", ContainerPort: 9002, Protocol: corev1.ProtocolTCP},
								{Name: servicePortName, ContainerPort: 41641, Protocol: corev1.ProtocolUDP},
							},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/healthz", Port: intstr.FromInt32(9002)}}, PeriodSeconds: 1},
							VolumeMounts: []corev1.VolumeMount{
								{Name: configVolume, ReadOnly: true, MountPath: "/etc/tsconfig/my-relay-1"},
								{Name: tmpVolume, MountPath: "/tmp"},
								{Name: authKeyVolume, ReadOnly: true, MountPath: "/etc/tailscale/authkey"},
							},
							SecurityContext: defaultSecurityContext(),
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
						}},
					},
				},
			},
		}
	}
	// metricsOn is want with containerboot's /metrics on.
	metricsOn := want()
	env := &metricsOn.Spec.Template.Spec.Containers[0].Env
	*env = slices.Insert(*env, len(*env)-1, corev1.EnvVar{Name: "TS_ENABLE_METRICS", Value: "true"})
	metricsOn.Spec.Template.Spec.Containers[0].Ports[0].Name = "metrics"
	cases := map[string]struct {
		reason string
		r      *relay
		zone   string
		want   *appsv1.StatefulSet
	}{
		"Default": {
			reason: "One single-pod StatefulSet per replica: its own config, state Secret and an optional key volume.",
			r:      testRelay(t),
			want:   want(),
		},
		"Minted": {
			reason: "With no key Secret named, the pod mounts the replica's minted key Secret, optional, under its own name.",
			r:      testRelay(t, func(r *relay) { r.AuthKey = nil }),
			want: func() *appsv1.StatefulSet {
				s := want()
				p := &s.Spec.Template.Spec
				p.Volumes[2].Secret = &corev1.SecretVolumeSource{SecretName: "my-relay-1-authkey", Optional: ptr.To(true)}
				p.Containers[0].VolumeMounts[2].MountPath = "/etc/tailscale/authkey/my-relay-1"
				return s
			}(),
		},
		"Zone": {
			reason: "A replica pinned to a zone requires it, on top of the user's own node affinity.",
			r: testRelay(t, func(r *relay) {
				r.Pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"edge"}}}}}}}}
			}),
			zone: "eu-west-1b",
			want: func() *appsv1.StatefulSet {
				s := want()
				s.Spec.Template.Spec.TopologySpreadConstraints = nil // its zone is pinned
				s.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"edge"}},
						{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1b"}},
					}}}}}}
				return s
			}(),
		},
		"ProxyClass": {
			reason: "Every field the Tailscale operator applies from a ProxyClass: StatefulSet labels and annotations (ours win on our labels), node name, DNS policy and config, image pull policy, extra env, on top of the pod fields.",
			r: testRelay(t, func(r *relay) {
				pc := &proxyClass{}
				if err := json.Unmarshal([]byte(`{"spec":{"statefulSet":{
					"labels":{"team":"net","app.kubernetes.io/name":"not-ours"},"annotations":{"a":"b"},
					"pod":{"nodeName":"node-7","dnsPolicy":"None","dnsConfig":{"nameservers":["10.0.0.10"]},
					       "tailscaleContainer":{"imagePullPolicy":"Always","env":[{"name":"TS_DEBUG_FIREWALL_MODE","value":"auto"}]}}}}}`), pc); err != nil {
					t.Fatal(err)
				}
				r.Pod = layerPod(pc, nil)
			}),
			want: func() *appsv1.StatefulSet {
				s := want()
				s.Labels["team"] = "net"
				s.Annotations = map[string]string{"a": "b"}
				p := &s.Spec.Template.Spec
				p.NodeName, p.DNSPolicy, p.DNSConfig = "node-7", corev1.DNSNone, &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
				p.Containers[0].ImagePullPolicy = corev1.PullAlways
				p.Containers[0].Env = append(p.Containers[0].Env, corev1.EnvVar{Name: "TS_DEBUG_FIREWALL_MODE", Value: "auto"})
				return s
			}(),
		},
		"Metrics": {
			reason: "spec.metrics.enable turns containerboot's /metrics on, on the health port, then named metrics.",
			r:      testRelay(t, func(r *relay) { r.Spec.Metrics = &v1alpha1.Metrics{Enable: true} }),
			want:   metricsOn,
		},
		"MetricsFromProxyClass": {
			reason: "A ProxyClass's spec.metrics.enable, which the Tailscale operator ignores for PeerRelays, does the same.",
			r: testRelay(t, func(r *relay) {
				pc := &proxyClass{}
				if err := json.Unmarshal([]byte(`{"spec":{"metrics":{"enable":true}}}`), pc); err != nil {
					t.Fatal(err)
				}
				r.Pod = layerPod(pc, nil)
			}),
			want: metricsOn,
		},
		"PodSettings": {
			reason: "Pod labels and annotations are the user's, but ours win on the labels the selector needs; resources and node selector are the user's.",
			r: testRelay(t, func(r *relay) {
				r.Pod.Labels = map[string]string{labelReplica: "9", "team": "net"}
				r.Pod.Annotations = map[string]string{"a": "b"}
				r.Pod.NodeSelector = map[string]string{"pool": "edge"}
				r.Pod.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
			}),
			want: func() *appsv1.StatefulSet {
				s := want()
				tmpl := &s.Spec.Template
				tmpl.Labels = map[string]string{"team": "net"}
				for k, v := range labels1 {
					tmpl.Labels[k] = v
				}
				tmpl.Annotations = map[string]string{"a": "b"}
				tmpl.Spec.NodeSelector = map[string]string{"pool": "edge"}
				tmpl.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
				// No CPU asked for: Go's own default.
				env := &tmpl.Spec.Containers[0].Env
				*env = (*env)[:len(*env)-1]
				return s
			}(),
		},
		"HostPort": {
			reason: "spec.hostPort binds the relay's UDP port on the node too.",
			r:      testRelay(t, func(r *relay) { r.Spec.HostPort = true }),
			want: func() *appsv1.StatefulSet {
				s := want()
				s.Spec.Template.Spec.Containers[0].Ports[1].HostPort = 41641
				return s
			}(),
		},
		"SpreadOfTheUser": {
			reason: "Topology spread constraints of the user's (spec.pod, a ProxyClass) replace the default spread.",
			r: testRelay(t, func(r *relay) {
				r.Pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
			}),
			want: func() *appsv1.StatefulSet {
				s := want()
				s.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
				return s
			}(),
		},
		"GOMAXPROCSFromLimit": {
			reason: "With a CPU limit, GOMAXPROCS is the limit rounded up, from the downward API.",
			r: testRelay(t, func(r *relay) {
				r.Pod.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}
			}),
			want: func() *appsv1.StatefulSet {
				s := want()
				c := &s.Spec.Template.Spec.Containers[0]
				c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}
				c.Env[len(c.Env)-1] = gomaxprocsFrom("limits.cpu")
				return s
			}(),
		},
		"GOMAXPROCSOfTheUser": {
			reason: "A GOMAXPROCS the user sets (a ProxyClass's env) replaces ours rather than sit beside it.",
			r: testRelay(t, func(r *relay) {
				r.Pod.Env = []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "4"}}
			}),
			want: func() *appsv1.StatefulSet {
				s := want()
				c := &s.Spec.Template.Spec.Containers[0]
				c.Env[len(c.Env)-1] = corev1.EnvVar{Name: "GOMAXPROCS", Value: "4"}
				return s
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The StatefulSet names its own pod template by content.
			if tc.want.Annotations == nil {
				tc.want.Annotations = map[string]string{}
			}
			tc.want.Annotations[annotationPodTemplate] = podTemplateHash(tc.want.Spec.Template)
			if diff := cmp.Diff(tc.want, replicaStatefulSet(tc.r, 1, tc.zone)); diff != "" {
				t.Errorf("%s\nStatefulSet (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSecurityContext: a PeerRelay's or ProxyClass's securityContext is
// merged over the restricted defaults field by field, never in their place.
func TestSecurityContext(t *testing.T) {
	with := func(f func(*corev1.SecurityContext)) *corev1.SecurityContext {
		sc := defaultSecurityContext()
		f(sc)
		return sc
	}
	cases := map[string]struct {
		reason string
		set    *corev1.SecurityContext
		want   *corev1.SecurityContext
	}{
		"Unset": {
			reason: "Nothing set: the restricted defaults.",
			want:   defaultSecurityContext(),
		},
		"OnlyRunAsUser": {
			reason: "A ProxyClass setting only runAsUser keeps drop ALL, RuntimeDefault seccomp, no escalation and the read-only root.",
			set:    &corev1.SecurityContext{RunAsUser: ptr.To[int64](2000)},
			want:   with(func(sc *corev1.SecurityContext) { sc.RunAsUser = ptr.To[int64](2000) }),
		},
		"FalseWins": {
			reason: "A field set to false is set: a writable root when asked for.",
			set:    &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false)},
			want:   with(func(sc *corev1.SecurityContext) { sc.ReadOnlyRootFilesystem = ptr.To(false) }),
		},
		"AddCapability": {
			reason: "Adding a capability keeps the others dropped.",
			set:    &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}},
			want: with(func(sc *corev1.SecurityContext) {
				sc.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, securityContext(tc.set)); diff != "" {
				t.Errorf("%s\nsecurityContext (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
