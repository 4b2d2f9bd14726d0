package fn

import (
	"encoding/json"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	xpresource "github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Per-builder table tests: a relay in, typed objects out, compared whole.

// testRelay is PeerRelay team-a/my-relay with every default applied, then
// mutate.
func testRelay(t *testing.T, mutate ...func(*relay)) *relay {
	t.Helper()
	r, err := defaults(inputs{Name: "my-relay", Namespace: "team-a"}, v1alpha1.PeerRelaySpec{
		Replicas:         ptr.To[int32](2),
		AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "ts-auth"},
	}, &fnv1alpha1.Input{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

var labels1 = map[string]string{
	labelName: appName, labelInstance: "my-relay", labelManagedBy: "function-peerrelay", labelReplica: "1",
}

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

func TestService(t *testing.T) {
	base := func(typ corev1.ServiceType, annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-relay-1", Namespace: "team-a", Labels: labels1, Annotations: annotations},
			Spec: corev1.ServiceSpec{
				Type:     typ,
				Selector: map[string]string{labelPodName: "my-relay-1-0"},
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
				return s
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, replicaStatefulSet(tc.r, 1, tc.zone)); diff != "" {
				t.Errorf("%s\nStatefulSet (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBaseName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := map[string]struct {
		reason, name, want, why string
	}{
		"Fits":     {reason: "A DNS-1035 label short enough is used as it is.", name: "my-relay", want: "my-relay"},
		"Dots":     {reason: "Dots become dashes, and a hash keeps names apart.", name: "my.relay", want: "my-relay-" + shortHash("my.relay"), why: "no dots"},
		"Digit":    {reason: "A leading digit gets a letter first.", name: "9-lives", want: "pr-9-lives-" + shortHash("9-lives"), why: "must start with a letter"},
		"TooLong":  {reason: "A long name is cut, and the hash keeps two long names apart.", name: long, want: long[:maxBaseLen-9] + "-" + shortHash(long), why: "within"},
		"Capitals": {reason: "Capitals are lowered.", name: "MyRelay", want: "myrelay-" + shortHash("MyRelay"), why: "lower-case"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, why := baseName(tc.name)
			if got != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("%s\nbaseName(%q) = %q, %q; want %q and a reason containing %q", tc.reason, tc.name, got, why, tc.want, tc.why)
			}
			if len(got) > maxBaseLen {
				t.Errorf("%s\n%q is longer than %d", tc.reason, got, maxBaseLen)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	// Compared by type and field: the details are for people.
	byField := cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail", "Origin", "CoveredByDeclarative")
	cases := map[string]struct {
		reason  string
		spec    v1alpha1.PeerRelaySpec
		want    field.ErrorList
		awsOnly bool
	}{
		"Minimal": {reason: "The seed's minimal PeerRelay is valid.", spec: v1alpha1.PeerRelaySpec{Replicas: ptr.To[int32](1)}},
		"Everything": {
			reason: "Every problem is reported at once, each naming its field.",
			spec: v1alpha1.PeerRelaySpec{
				Replicas:         ptr.To[int32](101),
				Tags:             []v1alpha1.Tag{"k8s", "tag:a", "tag:a"},
				Port:             ptr.To[int32](0),
				AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "Bad_Name", Key: "a/b"},
				StaticEndpoints:  []string{"relay.example.com:1", "203.0.113.1:1", "203.0.113.1:1"},
			},
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), nil, ""),
				field.Invalid(field.NewPath("spec", "tags").Index(0), nil, ""),
				field.Duplicate(field.NewPath("spec", "tags").Index(2), nil),
				field.Invalid(field.NewPath("spec", "port"), nil, ""),
				field.Invalid(field.NewPath("spec", "authKeySecretRef", "name"), nil, ""),
				field.Invalid(field.NewPath("spec", "authKeySecretRef", "key"), nil, ""),
				field.Invalid(field.NewPath("spec", "staticEndpoints").Index(0), nil, ""),
				field.Duplicate(field.NewPath("spec", "staticEndpoints").Index(2), nil),
			},
		},
		"AWSOnly": {
			reason: "Problems only under spec.aws are AWS configuration problems.",
			spec: v1alpha1.PeerRelaySpec{Replicas: ptr.To[int32](2), AWS: &v1alpha1.AWSSpec{
				ElasticIPs:    []v1alpha1.ElasticIP{{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a", Allocate: true}},
				LoadBalancer:  "ALB",
				ZonePlacement: v1alpha1.ZonePlacementPerReplica,
			}},
			want: field.ErrorList{
				field.Invalid(field.NewPath("spec", "aws", "elasticIPs"), nil, ""),
				field.Forbidden(field.NewPath("spec", "aws", "elasticIPs").Index(0).Child("allocationID"), ""),
				field.NotSupported[string](field.NewPath("spec", "aws", "loadBalancer"), nil, nil),
			},
			awsOnly: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, awsOnly := validate(&tc.spec)
			if diff := cmp.Diff(tc.want, got, byField, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nerrors (-want +got):\n%s", tc.reason, diff)
			}
			if awsOnly != tc.awsOnly {
				t.Errorf("%s\nawsOnly %v, want %v", tc.reason, awsOnly, tc.awsOnly)
			}
		})
	}
}

func TestRelayConfig(t *testing.T) {
	want := func(p relayv1alpha1.RelayConfigParameters) *relayv1alpha1.RelayConfig {
		return &relayv1alpha1.RelayConfig{
			TypeMeta:   metav1.TypeMeta{APIVersion: "relay.peerrelay.io/v1alpha1", Kind: "RelayConfig"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-relay-1", Namespace: "team-a", Labels: labels1},
			Spec: relayv1alpha1.RelayConfigSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
				ForProvider:         p,
			},
		}
	}
	base := relayv1alpha1.RelayConfigParameters{
		ServiceRef: &relayv1alpha1.LocalRef{Name: "my-relay-1"}, ConfigSecretName: "my-relay-1-config", StateSecretName: "my-relay-1",
		Hostname: "my-relay-1", Port: 41641, Tags: []string{"tag:k8s"}, Resolution: relayv1alpha1.ResolutionAuto,
		AuthKeySecretRef: &relayv1alpha1.AuthKeyRef{Name: "ts-auth", Key: "authkey", Mode: relayv1alpha1.AuthKeyModeFile, MountPath: "/etc/tailscale/authkey"},
	}
	cases := map[string]struct {
		reason string
		r      *relay
		want   *relayv1alpha1.RelayConfig
	}{
		"Default": {
			reason: "The replica's Service, config and state Secrets, hostname, port and tags; the key by file, never inline.",
			r:      testRelay(t),
			want:   want(base),
		},
		"Minted": {
			reason: "With no key Secret named the RelayConfig names none: the provider mints.",
			r:      testRelay(t, func(r *relay) { r.AuthKey = nil }),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.AuthKeySecretRef = nil
				return want(p)
			}(),
		},
		"Tailnet": {
			reason: "spec.tailnet names the ClusterProviderConfig whose Tailscale API access the replica uses.",
			r: func() *relay {
				r, err := defaults(inputs{Name: "my-relay", Namespace: "team-a"}, v1alpha1.PeerRelaySpec{
					Replicas: ptr.To[int32](2), AuthKeySecretRef: &v1alpha1.SecretKeyRef{Name: "ts-auth"}, Tailnet: "tailnet-b",
				}, &fnv1alpha1.Input{ProviderConfigName: "other"})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}(),
			want: func() *relayv1alpha1.RelayConfig {
				rc := want(base)
				rc.Spec.ProviderConfigReference.Name = "tailnet-b"
				return rc
			}(),
		},
		"Managed": {
			reason: "With a composed load balancer there is no Service to follow: the provider finds the load balancer by name and asks AWS.",
			r: testRelay(t, func(r *relay) {
				r.AWS = &awsPlan{Region: "eu-west-1", Managed: true, Replicas: []replicaPlan{{}, {Want: placementIDs{SubnetID: "subnet-0b", AllocationID: "eipalloc-0b"}}}}
			}),
			want: func() *relayv1alpha1.RelayConfig {
				p := base
				p.ServiceRef, p.Resolution = nil, relayv1alpha1.ResolutionAWS
				p.AWS = &relayv1alpha1.AWSResolution{Region: "eu-west-1", SubnetID: "subnet-0b", AllocationID: "eipalloc-0b",
					LoadBalancerName: "my-relay-" + shortHash("team-a/my-relay") + "-1"}
				return want(p)
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, relayConfig(tc.r, 1)); diff != "" {
				t.Errorf("%s\nRelayConfig (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	cases := map[string]struct {
		reason string
		r      *relay
		want   []string
	}{
		"None": {reason: "A plain PeerRelay has nothing to warn of.", r: testRelay(t, func(r *relay) { r.Spec.AuthKeySecretRef = nil; r.AuthKey = nil })},
		"AnnotationIgnored": {
			reason: "A Service annotation Elastic IP pinning overrides is ignored, as the Tailscale operator ignores it, with a warning naming it.",
			r: testRelay(t, func(r *relay) {
				r.Spec.AWS = &v1alpha1.AWSSpec{ElasticIPs: []v1alpha1.ElasticIP{{SubnetID: "subnet-0a", AllocationID: "eipalloc-0a"}}}
				r.Spec.Service = &v1alpha1.ServiceSpec{Annotations: map[string]string{annotationEIPAllocations: "eipalloc-0ff", "x": "y"}}
			}),
			want: []string{"spec.service.annotations[" + annotationEIPAllocations + "] is ignored: spec.aws pins each replica's Service to its own subnet and Elastic IP"},
		},
		"TagsWithKey": {
			reason: "spec.tags beside a supplied key is ignored: the key's tags win.",
			r:      testRelay(t, func(r *relay) { r.Spec.Tags = []v1alpha1.Tag{"tag:relay"} }),
			want:   []string{"spec.tags is ignored while spec.authKeySecretRef is set: the devices get the tags of the key in Secret ts-auth"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, warnings(tc.r), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nwarnings (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestServiceReadiness(t *testing.T) {
	obs := observedState{observed: map[xpresource.Name]xpresource.ObservedComposed{"service-0": {Resource: composed.New()}}}
	sum := summary{replicas: []replicaObservation{{}}} // no ingress
	cases := map[string]struct {
		reason string
		r      *relay
		want   xpresource.Ready
	}{
		"LoadBalancer": {reason: "A LoadBalancer Service is ready once it has an ingress.", r: testRelay(t), want: xpresource.ReadyFalse},
		"Managed": {
			reason: "With load balancers composed as managed resources the Service is a ClusterIP that never gets an ingress: ready once it exists, or the XR is never Ready.",
			r:      testRelay(t, func(r *relay) { r.Spec.AWS = &v1alpha1.AWSSpec{LoadBalancer: v1alpha1.LoadBalancerManaged} }),
			want:   xpresource.ReadyTrue,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := readiness("service-0", tc.r, obs, sum); got != tc.want {
				t.Errorf("%s\nreadiness %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestImageTooOld(t *testing.T) {
	for image, old := range map[string]bool{
		"tailscale/tailscale:v1.102.5":                        false,
		"tailscale/tailscale:v1.110.0":                        false,
		"tailscale/tailscale:v1.98.2":                         true,
		"ghcr.io/tailscale/tailscale:v1.90.0@sha256:0123abcd": true,
		"registry.example:5000/tailscale:v1.80.1":             true,
		"registry.example:5000/tailscale":                     false, // no tag: cannot judge
		"tailscale/tailscale:latest":                          false,
		"tailscale/tailscale:unstable-v1.99.1":                false,
		"example/other-relay:v1.0.0":                          false,
	} {
		if got := imageTooOld(image) != ""; got != old {
			t.Errorf("imageTooOld(%q) = %v, want %v", image, got, old)
		}
	}
}
