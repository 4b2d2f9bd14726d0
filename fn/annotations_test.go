package fn

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

func TestRunFunctionServiceAnnotations(t *testing.T) {
	cases := map[string]struct {
		reason   string
		spec     string
		input    string
		observed map[string]*fnv1.Resource
		replica  string
		want     map[string]string // subset expected
		absent   []string
	}{
		"CloudDefaults": {
			reason:  "Without elasticIPs a Service gets the public NLB defaults and cross-zone on.",
			spec:    "replicas: 1",
			replica: "service-0",
			want: map[string]string{
				"service.beta.kubernetes.io/aws-load-balancer-scheme":           "internet-facing",
				"service.beta.kubernetes.io/aws-load-balancer-attributes":       "load_balancing.cross_zone.enabled=true",
				"service.beta.kubernetes.io/azure-load-balancer-internal":       "false",
				"service.beta.kubernetes.io/aws-load-balancer-healthcheck-port": "9002",
			},
			absent: []string{annotationEIPAllocations},
		},
		"UserOverridesDefaultsAndKeepsAttributes": {
			reason: "The user's annotations beat the cloud defaults, and a user-set attributes key is not replaced.",
			spec: `replicas: 1
service:
  annotations:
    service.beta.kubernetes.io/aws-load-balancer-scheme: internal
    service.beta.kubernetes.io/aws-load-balancer-attributes: deletion_protection.enabled=true`,
			replica: "service-0",
			want: map[string]string{
				"service.beta.kubernetes.io/aws-load-balancer-scheme":     "internal",
				"service.beta.kubernetes.io/aws-load-balancer-attributes": "deletion_protection.enabled=true",
			},
		},
		"ElasticIPPerReplica": {
			reason: "Replica N is pinned to elasticIPs[N].",
			spec: `replicas: 2
aws:
  elasticIPs:
  - {allocationID: eipalloc-0aa, subnetID: subnet-0aa}
  - {allocationID: eipalloc-0bb, subnetID: subnet-0bb}`,
			observed: map[string]*fnv1.Resource{"relayconfig-1": checkedRelayConfig(t, "subnet-0bb", "eipalloc-0bb", "")},
			replica:  "service-1",
			want: map[string]string{
				annotationEIPAllocations: "eipalloc-0bb",
				annotationSubnets:        "subnet-0bb",
			},
		},
		"AzureOnly": {
			reason:  "Input cloud: azure leaves the AWS annotations out.",
			spec:    "replicas: 1",
			input:   "cloud: azure",
			replica: "service-0",
			want:    map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "false"},
			absent:  []string{"service.beta.kubernetes.io/aws-load-balancer-scheme", annotationLBAttributes},
		},
		"GCP": {
			reason:  "Input cloud: gcp adds no annotation: GKE's default LoadBalancer is public and carries UDP.",
			spec:    "replicas: 1",
			input:   "cloud: gcp",
			replica: "service-0",
			want:    map[string]string{},
			absent:  []string{"service.beta.kubernetes.io/aws-load-balancer-scheme", "service.beta.kubernetes.io/azure-load-balancer-internal", annotationLBAttributes},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: xr(t, tc.spec), Resources: tc.observed}}
			if tc.input != "" {
				req.Input = mustStruct(t, "apiVersion: fn.peerrelay.io/v1alpha1\nkind: Input\n"+tc.input)
			}
			rsp := run(t, req)
			svc := rsp.GetDesired().GetResources()[tc.replica]
			if svc == nil {
				t.Fatalf("%s\n%s not composed; results: %v", tc.reason, tc.replica, rsp.GetResults())
			}
			got := map[string]string{}
			annotations, _ := valueAt(t, svc.GetResource(), "metadata", "annotations").(map[string]any) // none at all: nil
			for k, v := range annotations {
				got[k] = v.(string)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s\nannotation %s: want %q, got %q", tc.reason, k, v, got[k])
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s\nannotation %s should be absent", tc.reason, k)
				}
			}
		})
	}
}
