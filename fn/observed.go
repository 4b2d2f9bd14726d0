package fn

import (
	"strconv"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// observedState is what the function reads back from the cluster.
type observedState struct {
	// observed composed resources by key.
	observed map[resource.Name]resource.ObservedComposed
	// pods by name, from the required resources; nil when Crossplane has
	// not supplied them (yet).
	pods map[string]*composed.Unstructured
	// podsRequired: the function asks for the pods (needsPods); otherwise
	// readiness comes from the StatefulSets.
	podsRequired bool
	// authKey says what is wrong with the auth key Secret, if anything.
	authKey string
	// last is the status the PeerRelay has now.
	last v1alpha1.PeerRelayStatus
}

// lastStatus is the status the observed PeerRelay carries.
func lastStatus(xr *resource.Composite) v1alpha1.PeerRelayStatus {
	var st v1alpha1.PeerRelayStatus
	_ = xr.Resource.GetValueInto("status", &st)
	return st
}

func (o observedState) get(key string) (*composed.Unstructured, bool) {
	oc, ok := o.observed[resource.Name(key)]
	return oc.Resource, ok && oc.Resource != nil
}

// isTrue tells whether obj's condition of type typ is True.
func isTrue(obj *composed.Unstructured, typ xpv2.ConditionType) bool {
	return obj.GetCondition(typ).Status == corev1.ConditionTrue
}

// indexed reads the replica index of a key such as "service-3" with the
// given prefix ("service-").
func indexed(key, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" || rest[0] < '0' || rest[0] > '9' {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil
}
