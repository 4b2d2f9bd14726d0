package fn

import (
	"slices"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
)

// readiness tells Crossplane when each composed resource is ready, so the XR
// is never Ready before every replica has an endpoint and a ready pod.
func readiness(key string, r *relay, o observedState, s summary) resource.Ready {
	obj, ok := o.get(key)
	if !ok {
		return resource.ReadyFalse
	}
	if i, ok := replicaIndex(key, keyPrefixService); ok {
		// A ClusterIP Service (load balancers composed as managed
		// resources) never gets an ingress: it is ready once it exists. So
		// is one whose replica advertises static endpoints alone: no load
		// balancer may ever come (a port forward to a node, bare metal).
		// A NodePort or hostPort relay's Service has no load balancer either.
		return readyIf(r.managedLoadBalancers() || r.nodeMode() != "" || (i < len(s.replicas) && (s.replicas[i].serviceReady || s.replicas[i].staticOnly)))
	}
	if i, ok := replicaIndex(key, keyPrefixRelayConfig); ok {
		return readyIf(i < len(s.replicas) && s.replicas[i].configReady)
	}
	if i, ok := replicaIndex(key, keyPrefixStatefulSet); ok {
		// Its pod's readiness, as PeerRelayReady sees it: the StatefulSet's
		// own readyReplicas lags the pod, and Ready would turn True a
		// reconcile after PeerRelayReady.
		return readyIf(i < len(s.replicas) && s.replicas[i].podReady)
	}
	if slices.ContainsFunc(awsKeyPrefixes, func(p string) bool { return strings.HasPrefix(key, p) }) {
		return readyIf(isTrue(obj, xpv2.TypeReady))
	}
	return resource.ReadyTrue // exists: ServiceAccount, Role, RoleBinding
}

func readyIf(b bool) resource.Ready {
	if b {
		return resource.ReadyTrue
	}
	return resource.ReadyFalse
}
