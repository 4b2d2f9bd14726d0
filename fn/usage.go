package fn

import (
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// keyPrefixUsage keys replica i's Usage of its Elastic IP.
const keyPrefixUsage = "usage-eip-"

func usageKey(i int) string { return keyPrefixUsage + strconv.Itoa(i) }

// eipUsage keeps replica i's allocated Elastic IP until what holds it is
// gone: the replica's Service (the AWS Load Balancer Controller's NLB has
// the address) or, with loadBalancer: Managed, its NLB. Deleting a
// PeerRelay deletes all of them at once; AWS refuses to release an address
// a load balancer still uses, and the EIP's deletion would fail until then.
// Crossplane's Usage blocks the EIP's deletion and replays it once the user
// is gone. Namespaced Usages are for v2 PeerRelays: a legacy claim's EIP is
// cluster-scoped and gets none.
func eipUsage(r *relay, i int) (keyedObject, bool) {
	rp := r.AWS.Replicas[i]
	if r.AWS.Legacy || !rp.Allocate || rp.Use == nil {
		return keyedObject{}, false // no EIP of ours, or nothing uses it yet
	}
	eip := elasticIP(r, i)
	by := map[string]any{"apiVersion": "v1", "kind": "Service", "resourceRef": map[string]any{"name": replicaName(r.Base, i)}}
	if r.AWS.Managed {
		lb := loadBalancer(r, i, *rp.Use)
		by = map[string]any{"apiVersion": lb.GetAPIVersion(), "kind": lb.GetKind(), "resourceRef": map[string]any{"name": lb.GetName()}}
	}
	return keyedObject{usageKey(i), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "protection.crossplane.io/v1beta1",
		"kind":       "Usage",
		"metadata":   map[string]any{"name": eip.GetName() + "-eip", "namespace": r.Namespace, "labels": toAny(replicaLabels(r, i))},
		"spec": map[string]any{
			"of":             map[string]any{"apiVersion": eip.GetAPIVersion(), "kind": eip.GetKind(), "resourceRef": map[string]any{"name": eip.GetName()}},
			"by":             by,
			"replayDeletion": true,
		},
	}}}, true
}
