package fn

import (
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// checkedRelayConfig is an observed RelayConfig whose provider checked a
// subnet and allocation; problems, when set, is what it found wrong.
func checkedRelayConfig(t testing.TB, subnet, alloc, problem string, more ...string) *fnv1.Resource {
	t.Helper()
	y := "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  atProvider:\n    aws:\n      checked: true\n      subnetID: " + subnet + "\n      allocationID: " + alloc + "\n      zone: eu-west-1" + subnet[len(subnet)-1:] + "\n      vpcID: vpc-0abc\n"
	if problem != "" {
		y += "      problems: [\"" + problem + "\"]\n"
	}
	for _, m := range more {
		y += m + "\n"
	}
	return &fnv1.Resource{Resource: mustStruct(t, y)}
}

func observedEIP(t testing.TB, alloc string) *fnv1.Resource {
	t.Helper()
	return &fnv1.Resource{Resource: mustStruct(t, "apiVersion: ec2.aws.m.upbound.io/v1beta1\nkind: EIP\nmetadata: {name: x}\nstatus:\n  atProvider: {allocationId: "+alloc+"}")}
}

func observedPods(t testing.TB, nameIP ...string) *fnv1.Resources {
	t.Helper()
	rs := &fnv1.Resources{}
	for i := 0; i+1 < len(nameIP); i += 2 {
		rs.Items = append(rs.Items, &fnv1.Resource{Resource: mustStruct(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+nameIP[i]+", namespace: team-a}\nstatus: {podIP: "+nameIP[i+1]+"}")})
	}
	return rs
}

// TestRunFunctionAWSPlacement: Elastic IPs and load balancers composed as
// Upbound managed resources, each step only once what it needs has been
// observed, and replicas placed in their subnets' zones.
func TestRunFunctionAWSPlacement(t *testing.T) {
	type want struct {
		// composed keys and keys that must not be composed
		has, hasNot []string
		// fields expected at path (dot-separated) of a composed key
		fields map[string]map[string]any
		// reason and a message fragment of PeerRelayReady
		reason xpv2.ConditionReason
		msg    string
		fatal  string
	}
	const allocate = `replicas: 2
aws:
  region: eu-west-1
  elasticIPs:
  - {subnetID: subnet-0a, allocate: true}
  - {subnetID: subnet-0b, allocate: true}`
	cases := map[string]struct {
		reason   string
		spec     string
		input    string
		legacy   bool
		status   string // the PeerRelay's status, YAML
		observed map[string]*fnv1.Resource
		pods     *fnv1.Resources
		want     want
	}{
		"AllocateFirstPass": {
			reason: "A new Elastic IP is composed per replica; the Service waits for its allocation ID, and the pods for their subnet's zone (per-replica zones are the default with pinned subnets).",
			spec:   allocate,
			want: want{
				has:    []string{"eip-0", "eip-1", "relayconfig-0"},
				hasNot: []string{"service-0", "service-1", "statefulset-0", "statefulset-1"},
				fields: map[string]map[string]any{"eip-1": {
					"apiVersion":              "ec2.aws.m.upbound.io/v1beta1",
					"kind":                    "EIP",
					"metadata.name":           "my-relay-1",
					"metadata.namespace":      "team-a",
					"spec.forProvider.domain": "vpc",
					"spec.forProvider.region": "eu-west-1",
					"spec.forProvider.tags.peerrelay.io/relay": "team-a/my-relay",
				}},
				reason: v1alpha1.ReasonEndpointsPending,
				msg:    "replica 1 waits for its Elastic IP my-relay-1 to report an allocation ID",
			},
		},
		"AllocatedButNotChecked": {
			reason: "The observed allocation goes to the RelayConfig for the provider to check; the Service still waits.",
			spec:   allocate,
			observed: map[string]*fnv1.Resource{
				"eip-0": observedEIP(t, "eipalloc-0a1"),
			},
			want: want{
				hasNot: []string{"service-0"},
				fields: map[string]map[string]any{"relayconfig-0": {
					"spec.forProvider.aws.allocationID": "eipalloc-0a1",
					"spec.forProvider.aws.subnetID":     "subnet-0a",
					"spec.forProvider.aws.region":       "eu-west-1",
				}},
				msg: "replica 0 waits for the provider to check subnet-0a and eipalloc-0a1 against AWS",
			},
		},
		"ZoneFromNodeSelector": {
			reason: "Pods pinned to a zone by spec.pod (or a ProxyClass, as the operator's guide does) run there: the zone is known without the provider.",
			spec:   allocate + "\npod: {nodeSelector: {topology.kubernetes.io/zone: eu-west-1a}}",
			want: want{
				has: []string{"statefulset-0", "statefulset-1"},
			},
		},
		"NoAWSCredentials": {
			reason: "Without AWS credentials the provider cannot check the placement (it is used unchecked) nor learn the zone, so the pods wait: the status says so, and what to do.",
			spec:   allocate,
			observed: map[string]*fnv1.Resource{
				"eip-0":         observedEIP(t, "eipalloc-0a1"),
				"relayconfig-0": {Resource: mustStruct(t, "apiVersion: relay.peerrelay.io/v1alpha1\nkind: RelayConfig\nmetadata: {name: x}\nstatus:\n  atProvider:\n    aws: {checked: false, subnetID: subnet-0a, allocationID: eipalloc-0a1, message: \"not checked: the provider config has no AWS credentials (spec.aws.source)\"}")},
			},
			want: want{
				has:    []string{"service-0"},
				hasNot: []string{"statefulset-0"},
				msg:    "replica 0 waits for the zone of subnet subnet-0a: set spec.aws.elasticIPs[0].zone, or give the provider config AWS credentials (spec.aws) to look it up",
			},
		},
		"AllocatedAndChecked": {
			reason: "Once the provider has checked it, the Service is pinned to the new allocation.",
			spec:   allocate,
			observed: map[string]*fnv1.Resource{
				"eip-0":         observedEIP(t, "eipalloc-0a1"),
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0a1", ""),
			},
			want: want{
				has:    []string{"service-0"},
				hasNot: []string{"service-1"},
				fields: map[string]map[string]any{"service-0": {
					"metadata.annotations." + annotationEIPAllocations: "eipalloc-0a1",
					"metadata.annotations." + annotationSubnets:        "subnet-0a",
					"spec.type": "LoadBalancer",
				}},
			},
		},
		"SubnetsShortForm": {
			reason: "subnets with allocate: true gives replica i subnets[i mod len].",
			spec:   "replicas: 3\naws: {region: eu-west-1, subnets: [subnet-0a, subnet-0b], allocate: true}",
			want: want{
				has: []string{"eip-0", "eip-1", "eip-2"},
				fields: map[string]map[string]any{"relayconfig-2": {
					"spec.forProvider.aws.subnetID": "subnet-0a",
				}},
			},
		},
		"RegionFromInput": {
			reason: "The Input's awsRegion is the default region.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0a, allocate: true}]}",
			input:  "awsRegion: us-east-2\nawsProviderConfig: {name: team-a-aws}",
			want: want{fields: map[string]map[string]any{"eip-0": {
				"spec.forProvider.region":     "us-east-2",
				"spec.providerConfigRef.name": "team-a-aws",
				"spec.providerConfigRef.kind": "ClusterProviderConfig",
			}}},
		},
		"NoRegion": {
			reason: "Allocating needs a region: a Fatal naming the field.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0a, allocate: true}]}",
			want:   want{fatal: "spec.aws.region: needed to create AWS managed resources", reason: v1alpha1.ReasonAWSConfigInvalid},
		},
		"Legacy": {
			reason: "A legacy XR composes the cluster-scoped kinds, named after the XR.",
			spec:   "replicas: 1\naws: {region: eu-west-1, elasticIPs: [{subnetID: subnet-0a, allocate: true}]}",
			legacy: true,
			want: want{fields: map[string]map[string]any{"eip-0": {
				"apiVersion":         "ec2.aws.upbound.io/v1beta1",
				"metadata.name":      "my-relay-x7k2p-0",
				"metadata.namespace": nil,
			}}},
		},
		"CheckFails": {
			reason: "A subnet the provider found wrong: AWSConfigInvalid naming replica and ID, and no Service.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0bad, allocationID: eipalloc-0a}]}",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0bad", "eipalloc-0a", "subnet subnet-0bad does not exist"),
			},
			want: want{
				hasNot: []string{"service-0"},
				reason: v1alpha1.ReasonAWSConfigInvalid,
				msg:    "replica 0: subnet subnet-0bad does not exist",
			},
		},
		"CheckFailsKeepsWhatWasApplied": {
			reason: "A bad new allocation leaves the replica's Service pinned to the last placement the provider found valid, as its RelayConfig records it.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0eee}]}",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0eee", "Elastic IP eipalloc-0eee is associated with instance i-0123", "      lastValid: {subnetID: subnet-0a, allocationID: eipalloc-0ddd}"),
			},
			want: want{
				fields: map[string]map[string]any{"service-0": {
					"metadata.annotations." + annotationEIPAllocations: "eipalloc-0ddd",
				}},
				reason: v1alpha1.ReasonAWSConfigInvalid,
				msg:    "replica 0: Elastic IP eipalloc-0eee is associated with instance i-0123",
			},
		},
		"NoRecordKeepsLiveService": {
			reason: "A replica with no record of the provider's yet (mid-upgrade) keeps its Service as it is, so an upgrade deletes no Service while a new placement waits.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0eee}]}",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0eee", "Elastic IP eipalloc-0eee is associated with instance i-0123"),
				"service-0":     {Resource: mustStruct(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: my-relay-0\n  annotations:\n    "+annotationEIPAllocations+": eipalloc-0ddd\n    "+annotationSubnets+": subnet-0a")},
			},
			want: want{
				fields: map[string]map[string]any{"service-0": {
					"metadata.annotations." + annotationEIPAllocations: "eipalloc-0ddd",
				}},
				reason: v1alpha1.ReasonAWSConfigInvalid,
			},
		},
		"TenantStatusComposesNothing": {
			reason: "A placement a tenant wrote into the PeerRelay's status (Kubernetes' edit role includes it) composes no Service for a replica the provider found no valid placement for.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0eee}]}",
			status: "replicas: [{index: 0, hostname: my-relay-0, podReady: true, aws: {subnetID: subnet-0b, allocationID: eipalloc-0ggg}}]",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0eee", "Elastic IP eipalloc-0eee is associated with instance i-0123"),
			},
			want: want{
				hasNot: []string{"service-0"},
				reason: v1alpha1.ReasonAWSConfigInvalid,
			},
		},
		"TenantWrittenPlacementIgnored": {
			reason: "Neither annotations a tenant wrote on the live Service nor a placement it wrote into the PeerRelay's status (Kubernetes' edit role includes it) are taken as the placement applied: the Service keeps the Elastic IP the provider last found valid, as the RelayConfig records.",
			spec:   "replicas: 1\naws: {elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0eee}]}",
			status: "replicas: [{index: 0, hostname: my-relay-0, podReady: true, aws: {subnetID: subnet-0b, allocationID: eipalloc-0ggg}}]",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0eee", "Elastic IP eipalloc-0eee is associated with instance i-0123", "      lastValid: {subnetID: subnet-0a, allocationID: eipalloc-0ddd}"),
				"service-0":     {Resource: mustStruct(t, "apiVersion: v1\nkind: Service\nmetadata:\n  name: my-relay-0\n  annotations:\n    "+annotationEIPAllocations+": eipalloc-0fff\n    "+annotationSubnets+": subnet-0f")},
			},
			want: want{
				fields: map[string]map[string]any{"service-0": {
					"metadata.annotations." + annotationEIPAllocations: "eipalloc-0ddd",
					"metadata.annotations." + annotationSubnets:        "subnet-0a",
				}},
				reason: v1alpha1.ReasonAWSConfigInvalid,
			},
		},
		"ManagedLoadBalancer": {
			reason: "Managed: an NLB with the checked subnet mapping, a UDP target group in the subnet's VPC, a listener and the pod's registration; the Service is ClusterIP and the RelayConfig finds the LB by name.",
			spec:   "replicas: 1\naws: {region: eu-west-1, loadBalancer: Managed, elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0a}]}",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0a", ""),
			},
			pods: observedPods(t, "my-relay-0-0", "10.0.1.5"),
			want: want{
				has: []string{"lb-0", "targetgroup-0", "listener-0", "target-0-10-0-1-5"},
				fields: map[string]map[string]any{
					"lb-0": {
						"apiVersion":                                    "elbv2.aws.m.upbound.io/v1beta1",
						"spec.forProvider.loadBalancerType":             "network",
						"spec.forProvider.internal":                     false,
						"spec.forProvider.enableCrossZoneLoadBalancing": true,
						"spec.forProvider.subnetMapping":                []any{map[string]any{"subnetId": "subnet-0a", "allocationId": "eipalloc-0a"}},
					},
					"targetgroup-0": {
						"spec.forProvider.protocol":    "UDP",
						"spec.forProvider.targetType":  "ip",
						"spec.forProvider.port":        float64(41641),
						"spec.forProvider.vpcId":       "vpc-0abc",
						"spec.forProvider.healthCheck": []any{map[string]any{"enabled": true, "protocol": "HTTP", "port": "9002", "path": "/healthz"}},
					},
					"listener-0": {
						"spec.forProvider.protocol":           "UDP",
						"spec.forProvider.loadBalancerArnRef": map[string]any{"name": "my-relay-0", "namespace": "team-a"},
					},
					"target-0-10-0-1-5": {
						"metadata.name":             "my-relay-0-10-0-1-5",
						"spec.forProvider.targetId": "10.0.1.5",
					},
					"service-0": {"spec.type": "ClusterIP", "metadata.annotations": nil},
					"relayconfig-0": {
						"spec.forProvider.resolution":           "AWS",
						"spec.forProvider.serviceRef":           nil,
						"spec.forProvider.aws.loadBalancerName": "my-relay-8cbd9d05549c138d-0",
					},
				},
			},
		},
		"ManagedLegacyNameKept": {
			reason: "A load balancer composed by an earlier version under its 32-bit name keeps it, and so does its target group and the RelayConfig that finds it: renaming would replace it, and its address with it.",
			spec:   "replicas: 1\naws: {region: eu-west-1, loadBalancer: Managed, elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0a}]}",
			observed: map[string]*fnv1.Resource{
				"relayconfig-0": checkedRelayConfig(t, "subnet-0a", "eipalloc-0a", ""),
				"lb-0":          {Resource: mustStruct(t, "apiVersion: elbv2.aws.m.upbound.io/v1beta1\nkind: LB\nmetadata: {name: my-relay-0}\nspec:\n  forProvider: {name: my-relay-8cbd9d05-0}")},
			},
			pods: observedPods(t, "my-relay-0-0", "10.0.1.5"),
			want: want{
				fields: map[string]map[string]any{
					"lb-0":          {"spec.forProvider.name": "my-relay-8cbd9d05-0"},
					"targetgroup-0": {"spec.forProvider.name": "my-relay-8cbd9d05-0"},
					"relayconfig-0": {"spec.forProvider.aws.loadBalancerName": "my-relay-8cbd9d05-0"},
				},
			},
		},
		"ManagedWaitsForVPC": {
			reason: "No target group before the subnet's VPC is known, and no LB before the check.",
			spec:   "replicas: 1\naws: {region: eu-west-1, loadBalancer: Managed, elasticIPs: [{subnetID: subnet-0a, allocationID: eipalloc-0a}]}",
			want: want{
				has:    []string{"service-0", "relayconfig-0"},
				hasNot: []string{"lb-0", "targetgroup-0", "listener-0"},
			},
		},
		"PerReplicaZones": {
			reason: "PerReplica: one StatefulSet per replica pinned to its zone (from the spec, else the provider); a replica whose zone is unknown waits.",
			spec: `replicas: 3
aws:
  zonePlacement: PerReplica
  elasticIPs:
  - {subnetID: subnet-0a, allocationID: eipalloc-0a, zone: eu-west-1a}
  - {subnetID: subnet-0b, allocationID: eipalloc-0b}
  - {subnetID: subnet-0c, allocationID: eipalloc-0c}`,
			observed: map[string]*fnv1.Resource{
				"relayconfig-1": checkedRelayConfig(t, "subnet-0b", "eipalloc-0b", ""),
			},
			want: want{
				has:    []string{"statefulset-0", "statefulset-1"},
				hasNot: []string{"statefulset", "statefulset-2"},
				fields: map[string]map[string]any{
					"statefulset-1": {
						"metadata.name": "my-relay-1",
						"spec.replicas": float64(1),
						"spec.selector.matchLabels.peerrelay.io/replica":                                                            "1",
						"spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []any{"eu-west-1b"}}}}},
						"spec.template.spec.containers.0.env.2":                                                                     map[string]any{"name": "TS_KUBE_SECRET", "value": "my-relay-1"},
						"spec.template.spec.containers.0.env.3":                                                                     map[string]any{"name": "TS_EXPERIMENTAL_VERSIONED_CONFIG_DIR", "value": "/etc/tsconfig/my-relay-1"},
					},
					"service-1": {"spec.selector": map[string]any{labelPodName: "my-relay-1-0"}},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comp := xr(t, tc.spec)
			if tc.status != "" {
				comp = &fnv1.Resource{Resource: mustStruct(t, "apiVersion: peerrelay.io/v1alpha1\nkind: PeerRelay\nmetadata: {name: my-relay, namespace: team-a}\nspec:\n"+indent(tc.spec)+"\nstatus:\n"+indent(tc.status))}
			}
			if tc.legacy {
				comp = &fnv1.Resource{Resource: mustStruct(t, "apiVersion: peerrelay.io/v1alpha1\nkind: XPeerRelay\nmetadata:\n  name: my-relay-x7k2p\n  labels: {crossplane.io/claim-name: my-relay, crossplane.io/claim-namespace: team-a}\nspec:\n"+indent(tc.spec))}
			}
			req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: comp, Resources: podAccess(t, tc.observed)}}
			if tc.input != "" {
				req.Input = mustStruct(t, "apiVersion: fn.peerrelay.io/v1alpha1\nkind: Input\n"+tc.input)
			}
			if tc.pods != nil {
				req.RequiredResources = map[string]*fnv1.Resources{requiredPodsKey: tc.pods}
			}
			rsp := run(t, req)
			if tc.want.fatal != "" {
				if len(rsp.GetResults()) == 0 || !strings.Contains(rsp.GetResults()[0].GetMessage(), tc.want.fatal) {
					t.Errorf("%s\nwant a Fatal containing %q, got %v", tc.reason, tc.want.fatal, rsp.GetResults())
				}
			}
			got := rsp.GetDesired().GetResources()
			for _, k := range tc.want.has {
				if got[k] == nil {
					t.Errorf("%s\n%s not composed", tc.reason, k)
				}
			}
			for _, k := range tc.want.hasNot {
				if got[k] != nil {
					t.Errorf("%s\n%s composed, want it left out", tc.reason, k)
				}
			}
			for k, fields := range tc.want.fields {
				if got[k] == nil {
					t.Errorf("%s\n%s not composed", tc.reason, k)
					continue
				}
				for path, w := range fields {
					if diff := cmp.Diff(w, at(got[k].GetResource().AsMap(), path)); diff != "" {
						t.Errorf("%s\n%s %s (-want +got):\n%s", tc.reason, k, path, diff)
					}
				}
			}
			var cond *fnv1.Condition
			for _, c := range rsp.GetConditions() {
				if c.GetType() == string(v1alpha1.ConditionPeerRelayReady) {
					cond = c
				}
			}
			if tc.want.reason != "" && cond.GetReason() != string(tc.want.reason) {
				t.Errorf("%s\nPeerRelayReady reason: want %s, got %s (%s)", tc.reason, tc.want.reason, cond.GetReason(), cond.GetMessage())
			}
			if tc.want.msg != "" && !strings.Contains(cond.GetMessage(), tc.want.msg) {
				t.Errorf("%s\nPeerRelayReady message: want it to contain %q, got %q", tc.reason, tc.want.msg, cond.GetMessage())
			}
		})
	}
}

// at reads a dot-separated path; label keys with dots are matched whole
// when the remaining path names them, and numbers index lists.
func at(v any, path string) any {
	for path != "" {
		switch x := v.(type) {
		case map[string]any:
			if w, ok := x[path]; ok {
				return w
			}
			head, rest, _ := strings.Cut(path, ".")
			// Keys such as "peerrelay.io/replica" contain dots.
			for k := range x {
				if strings.HasPrefix(path, k+".") && len(k) > len(head) {
					head, rest = k, path[len(k)+1:]
				}
			}
			v, path = x[head], rest
		case []any:
			head, rest, _ := strings.Cut(path, ".")
			n := 0
			for _, c := range head {
				n = n*10 + int(c-'0')
			}
			if n >= len(x) {
				return nil
			}
			v, path = x[n], rest
		default:
			return nil
		}
	}
	return v
}

// TestLoadBalancerName: a replica's load balancer and target group name
// fits AWS's 32 characters and carries 64 bits of the PeerRelay's hash;
// one composed under the 32-bit name of earlier versions keeps it, and no
// other name read back from the cluster is taken.
func TestLoadBalancerName(t *testing.T) {
	short := &relay{relaySpec: relaySpec{Base: "my-relay", Name: "my-relay", Namespace: "team-a"}}
	long := &relay{relaySpec: relaySpec{Base: "a-very-long-peer-relay-name-for-the-edge", Name: "a-very-long-peer-relay-name-for-the-edge", Namespace: "team-a"}}
	cases := map[string]struct {
		reason   string
		r        *relay
		i        int
		composed string
		want     string
	}{
		"New":           {reason: "A new replica's name carries 16 hex digits of the hash.", r: short, want: "my-relay-8cbd9d05549c138d-0"},
		"LongBase":      {reason: "A long base is cut so that replica 99's name fits 32 characters.", r: long, i: 99, want: "a-very-long-93b7d6cab55be38d-99"},
		"Legacy":        {reason: "A load balancer composed under the earlier 32-bit name keeps it: a new name would be a new load balancer, a new address.", r: short, composed: "my-relay-8cbd9d05-0", want: "my-relay-8cbd9d05-0"},
		"LegacyLong":    {reason: "The earlier name of a long base (20 characters) is recognised too.", r: long, i: 99, composed: "a-very-long-peer-rel-93b7d6ca-99", want: "a-very-long-peer-rel-93b7d6ca-99"},
		"OtherComposed": {reason: "A composed name that is neither is not taken: what the cluster says is kept only when it is what an earlier version composed.", r: short, composed: "team-b-relay-0123abcd-0", want: "my-relay-8cbd9d05549c138d-0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := loadBalancerName(tc.r, tc.i, tc.composed)
			if got != tc.want || len(got) > 32 {
				t.Errorf("%s\nloadBalancerName = %q (%d characters), want %q", tc.reason, got, len(got), tc.want)
			}
		})
	}
}
