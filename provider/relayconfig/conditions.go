package relayconfig

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// condition is one of the RelayConfig's own conditions (the types and
// reasons in apis/relay/v1alpha1), as of now. SetConditions keeps the
// earlier transition time when nothing else changed.
func condition(typ xpv2.ConditionType, s corev1.ConditionStatus, r xpv2.ConditionReason, msg string) xpv2.Condition {
	return xpv2.Condition{Type: typ, Status: s, Reason: r, Message: msg, LastTransitionTime: metav1.Now()}
}
