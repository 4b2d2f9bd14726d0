package fn

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// annotationPodTemplate on a replica's StatefulSet is a hash of the pod
// template the function composed for it: what tells, from the observed
// object alone, whether the replica runs what the spec asks for now.
const annotationPodTemplate = "peerrelay.io/pod-template-hash"

// podTemplateHash names a pod template by its content.
func podTemplateHash(t corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// rollout picks the replicas whose StatefulSet must keep its observed pod
// template for now. A change of the pod template (an image, resources, the
// port) restarts a replica's pod; applied to every StatefulSet at once it
// would take every relay down together. So it is rolled one replica at a
// time, lowest index first, each waiting until the previous one runs the new
// template and is ready again. A replica that is down anyway is updated at
// once: holding it back would only keep it broken. A new replica (no
// observed StatefulSet) starts with the new template.
func rollout(r *relay, o observedState, s summary, want map[int]string) map[int]bool {
	type replica struct {
		stale, busy bool
	}
	reps := make([]replica, 0, r.Replicas)
	busy := 0
	for i := range r.Replicas {
		sts, ok := o.get(statefulSetKey(i))
		if ok {
			_, ok, _ = unstructured.NestedMap(sts.Object, "spec", "template")
		}
		if !ok || want[i] == "" {
			// Nothing to hold it at: it gets the new template.
			reps = append(reps, replica{})
			continue
		}
		rp := replica{stale: sts.GetAnnotations()[annotationPodTemplate] != want[i]}
		rp.busy = !s.replicas[i].podReady || rollingOut(sts)
		if !rp.stale && rp.busy {
			busy++ // on its way to the new template
		}
		reps = append(reps, rp)
	}
	hold := map[int]bool{}
	for i, rp := range reps {
		switch {
		case !rp.stale:
		case rp.busy:
			// Down already: updating it costs nothing.
		case busy == 0:
			busy++
		default:
			hold[i] = true
		}
	}
	return hold
}

// rollingOut tells whether a StatefulSet is still moving its pod to its
// latest template: the controller has not seen the latest spec, or has not
// replaced the pod and seen it ready.
func rollingOut(sts *composed.Unstructured) bool {
	gen, _ := sts.GetInteger("metadata.generation")
	seen, _ := sts.GetInteger("status.observedGeneration")
	current, _ := sts.GetString("status.currentRevision")
	update, _ := sts.GetString("status.updateRevision")
	ready, _ := sts.GetInteger("status.readyReplicas")
	return seen < gen || current != update || ready < 1
}

// asObserved is a held replica's StatefulSet as the cluster has it, for
// Crossplane to apply unchanged: its spec and our labels and annotations,
// none of what the API server keeps of its own.
func asObserved(sts *composed.Unstructured) *composed.Unstructured {
	out := composed.New()
	out.SetAPIVersion(sts.GetAPIVersion())
	out.SetKind(sts.GetKind())
	out.SetName(sts.GetName())
	out.SetNamespace(sts.GetNamespace())
	out.SetLabels(sts.GetLabels())
	out.SetAnnotations(sts.GetAnnotations())
	if spec, ok := sts.Object["spec"].(map[string]any); ok {
		out.Object["spec"] = runtime.DeepCopyJSON(spec)
	}
	return out
}
