package fn

import (
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// observedSTS is replica i's StatefulSet as the cluster reports it: running
// the pod template named hash, and still rolling it out unless settled.
func observedSTS(hash string, settled bool) *composed.Unstructured {
	sts := composed.New()
	sts.SetAPIVersion("apps/v1")
	sts.SetKind("StatefulSet")
	sts.SetName("my-relay-0")
	sts.SetNamespace("team-a")
	sts.SetAnnotations(map[string]string{annotationPodTemplate: hash, "crossplane.io/composition-resource-name": "statefulset-0"})
	sts.SetGeneration(2)
	sts.Object["spec"] = map[string]any{"replicas": int64(1), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "tailscaled", "image": "old"}}}}}
	status := map[string]any{"observedGeneration": int64(2), "currentRevision": "a", "updateRevision": "a", "readyReplicas": int64(1)}
	if !settled {
		status["updateRevision"] = "b"
	}
	sts.Object["status"] = status
	return sts
}

func TestRollout(t *testing.T) {
	type rep struct {
		hash     string // observed template; "" for no StatefulSet yet
		settled  bool
		podReady bool
	}
	cases := map[string]struct {
		reason string
		reps   []rep
		want   []int // held replicas
	}{
		"AllCurrent": {
			reason: "Nothing to roll out: nothing held.",
			reps:   []rep{{"new", true, true}, {"new", true, true}, {"new", true, true}},
		},
		"FirstGoesFirst": {
			reason: "A new template reaches the lowest replica first; the others keep theirs.",
			reps:   []rep{{"old", true, true}, {"old", true, true}, {"old", true, true}},
			want:   []int{1, 2},
		},
		"WaitForTheUpdatedOne": {
			reason: "Replica 0 runs the new template but its pod is not ready again: the rest wait.",
			reps:   []rep{{"new", true, false}, {"old", true, true}, {"old", true, true}},
			want:   []int{1, 2},
		},
		"WaitForTheController": {
			reason: "Replica 0's StatefulSet has not replaced its pod yet (its revisions differ), though the old pod still reports ready: the rest wait.",
			reps:   []rep{{"new", false, true}, {"old", true, true}, {"old", true, true}},
			want:   []int{1, 2},
		},
		"NextOne": {
			reason: "Replica 0 is done and ready: replica 1 goes next.",
			reps:   []rep{{"new", true, true}, {"old", true, true}, {"old", true, true}},
			want:   []int{2},
		},
		"DownAnyway": {
			reason: "A replica that is down already is updated at once (holding it back would keep it broken), and uses none of the one-at-a-time budget.",
			reps:   []rep{{"old", true, true}, {"old", true, false}, {"old", true, true}},
			want:   []int{2},
		},
		"NewReplicas": {
			reason: "A replica with no StatefulSet yet starts with the new template and holds nothing up.",
			reps:   []rep{{"", false, false}, {"old", true, true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := testRelay(t, func(r *relay) { r.Replicas = len(tc.reps) })
			o := observedState{observed: map[resource.Name]resource.ObservedComposed{}}
			s := summary{}
			want := map[int]string{}
			for i, rp := range tc.reps {
				want[i] = "new"
				if rp.hash != "" {
					o.observed[resource.Name(statefulSetKey(i))] = resource.ObservedComposed{Resource: observedSTS(rp.hash, rp.settled)}
				}
				s.replicas = append(s.replicas, replicaObservation{podReady: rp.podReady})
			}
			var got []int
			for i := range tc.reps {
				if rollout(r, o, s, want)[i] {
					got = append(got, i)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nheld replicas (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestAsObserved: a held StatefulSet is applied as the cluster has it: its
// spec and annotations (the old template's hash among them), no status and
// nothing the API server keeps of its own.
func TestAsObserved(t *testing.T) {
	sts := observedSTS("old", true)
	sts.SetUID("u-1")
	sts.SetResourceVersion("42")
	got := asObserved(sts)
	want := map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "my-relay-0", "namespace": "team-a",
			"annotations": map[string]any{annotationPodTemplate: "old", "crossplane.io/composition-resource-name": "statefulset-0"}},
		"spec": sts.Object["spec"],
	}
	if diff := cmp.Diff(want, got.Object); diff != "" {
		t.Errorf("held StatefulSet (-want +got):\n%s", diff)
	}
}
