package fn

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// keyDisruptionBudget is the PeerRelay's PodDisruptionBudget.
const keyDisruptionBudget = "poddisruptionbudget"

// maxUnavailable is what spec.disruptionBudget allows, 1 by default: a drain
// takes one relay at a time, so peers always have another to move to, and a
// single replica can still be drained (minAvailable 1 would block it).
func maxUnavailable(r *relay) intstr.IntOrString {
	if b := r.Spec.DisruptionBudget; b != nil && b.MaxUnavailable != nil {
		return *b.MaxUnavailable
	}
	return intstr.FromInt32(1)
}

// disruptionBudget covers every relay pod of the PeerRelay. The eviction API
// honours it: kubectl drain, cluster autoscalers and node upgrades wait
// rather than take every replica down at once.
func disruptionBudget(r *relay) *policyv1.PodDisruptionBudget {
	mu := maxUnavailable(r)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(r, r.Base, commonLabels(r)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &mu,
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(r)},
		},
	}
}

// disruptionBudgetDue says whether the PodDisruptionBudget is composed. Only
// where it protects something: more than one replica, or a budget the spec
// sets. And first once every replica's pod exists: while the StatefulSets
// create them its status would change with each, and each change would
// cost the PeerRelay's watch circuit breaker two tokens and wake another
// composition pass. Not later: a pod that never becomes ready (unschedulable,
// crash-looping) is when a drain must not take the others too. Once
// composed, it stays.
func disruptionBudgetDue(r *relay, obs observedState, sum summary) bool {
	if r.Replicas <= 1 && r.Spec.DisruptionBudget == nil {
		return false
	}
	if _, ok := obs.get(keyDisruptionBudget); ok {
		return true
	}
	for _, ro := range sum.replicas {
		if !ro.podCreated {
			return false
		}
	}
	return true
}
