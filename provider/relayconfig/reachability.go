package relayconfig

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"tailscale.com/tailcfg"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
	"github.com/peerrelay/peerrelay/provider/probe"
)

// probeTimeout bounds one probe of one advertised endpoint: the relay's
// allocation over DERP and the knock on the address.
const probeTimeout = 5 * time.Second

// reachability is what external needs to probe: the provider config's
// prober, and how often.
type reachability struct {
	// prober returns the provider config's prober.
	prober func(context.Context) (*probe.Prober, error)
	every  time.Duration
}

// checkReachability sets the replica's Reachable condition from its last
// finished probe of what it advertises now, and queues a probe when one
// is due; between probes the condition stays as it is, so a relay at rest
// costs no status write.
// viaKubeProxy are the advertised load balancer addresses kube-proxy
// answers for itself (servedByKubeProxy): an answer from one is said to
// have come from inside the cluster.
func (e *external) checkReachability(mg *v1alpha1.RelayConfig, eps []netip.AddrPort, viaKubeProxy []netip.Addr) {
	r := e.reachability
	if r == nil {
		if removeCondition(mg, v1alpha1.ConditionReachable) {
			e.probersForget(mg)
		}
		return
	}
	device := mg.Status.AtProvider.DeviceID
	ps := e.probers
	if device == "" || len(eps) == 0 {
		mg.SetConditions(condition(v1alpha1.ConditionReachable, corev1.ConditionUnknown, v1alpha1.ReasonProbePending,
			"waiting for the replica's device and an advertised endpoint to probe"))
		ps.sched.wait(mg.GetUID(), r.every)
		return
	}
	key := strings.Join(mg.Status.AtProvider.Endpoints, ",") + " on " + device
	if len(viaKubeProxy) > 0 {
		key += fmt.Sprintf(" via kube-proxy %v", viaKubeProxy)
	}
	if c, ok := ps.result(mg.GetUID(), key); ok {
		mg.SetConditions(c)
	} else {
		mg.SetConditions(condition(v1alpha1.ConditionReachable, corev1.ConditionUnknown, v1alpha1.ReasonProbePending,
			"probing the advertised endpoints"))
	}
	if !ps.sched.due(mg.GetUID(), key, r.every, reprobeAfter) {
		return
	}
	prober, allowed := r.prober, e.allowedTags
	ps.queue.push(probeJob{rc: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}, uid: mg.GetUID(), key: key,
		run: func(ctx context.Context) xpv2.Condition {
			return probeEndpoints(ctx, prober, allowed, device, eps, viaKubeProxy)
		}})
}

// probeEndpoints knocks on every advertised endpoint at once and says
// what answered.
func probeEndpoints(ctx context.Context, prober func(context.Context) (*probe.Prober, error), allowed tagPolicy, device string, eps []netip.AddrPort, viaKubeProxy []netip.Addr) xpv2.Condition {
	failed := func(msg string) xpv2.Condition {
		return condition(v1alpha1.ConditionReachable, corev1.ConditionUnknown, v1alpha1.ReasonProbeFailed, msg)
	}
	p, err := prober(ctx)
	if err != nil {
		return failed(err.Error())
	}
	relay, ok := p.Peer(tailcfg.StableNodeID(device))
	if !ok {
		return failed(fmt.Sprintf("device %s is not in the prober's netmap: it is not logged in, or the tailnet policy does not let the prober's tags see it", device))
	}
	// The device ID comes from the replica's state Secret, which its
	// namespace may write: probe only a device whose tags the provider
	// config allows (an untagged one is not, when it names tags), so a
	// tenant cannot aim the prober at another's device.
	if tags := relay.Tags().AsSlice(); !allowed.relayDevice(tags) {
		// The device's own tags are not the tenant's to learn.
		return failed(fmt.Sprintf("device %s does not carry only tags this provider config's spec.policy.tags allow (%v); it is not probed", device, allowed))
	}
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { errs[i] = p.Probe(ctx, relay, ep, probeTimeout) })
	}
	wg.Wait()
	var answered, silent []netip.AddrPort
	for i, err := range errs {
		switch {
		case err == nil:
			answered = append(answered, eps[i])
		case errors.Is(err, probe.ErrNoAnswer):
			silent = append(silent, eps[i])
		default:
			// The relay allocated nothing: it says nothing of the address.
			return failed(fmt.Sprintf("device %s: %v", device, err))
		}
	}
	return probeCondition(answered, silent, viaKubeProxy)
}

// probeCondition is the Reachable condition of a probe whose endpoints
// answered or stayed silent. An answer through a load balancer address
// kube-proxy serves itself (viaKubeProxy) proves the relay and its
// Service, not the load balancer: the message says so.
func probeCondition(answered, silent []netip.AddrPort, viaKubeProxy []netip.Addr) xpv2.Condition {
	list := func(eps []netip.AddrPort) string { return strings.Join(endpoint.Strings(eps), ", ") }
	var inCluster []netip.AddrPort
	for _, ep := range answered {
		if slices.Contains(viaKubeProxy, ep.Addr()) {
			inCluster = append(inCluster, ep)
		}
	}
	note := ""
	if len(inCluster) > 0 {
		note = fmt.Sprintf(" (%s answered from inside the cluster: kube-proxy serves a load balancer address whose ipMode is VIP itself, so the probe did not cross the load balancer)", list(inCluster))
	}
	switch {
	case len(silent) == 0:
		return condition(v1alpha1.ConditionReachable, corev1.ConditionTrue, v1alpha1.ReasonAnswered,
			fmt.Sprintf("every advertised endpoint answered the probe: %s%s", list(answered), note))
	case len(answered) > 0:
		return condition(v1alpha1.ConditionReachable, corev1.ConditionTrue, v1alpha1.ReasonPartlyAnswered,
			fmt.Sprintf("%s answered the probe%s; no answer from %s", list(answered), note, list(silent)))
	default:
		return condition(v1alpha1.ConditionReachable, corev1.ConditionFalse, v1alpha1.ReasonNoAnswer,
			fmt.Sprintf("no advertised endpoint answered the probe within %s: %s; the relay runs, so look at what lies between (load balancer, security groups, firewall, the address's zone)", probeTimeout, list(silent)))
	}
}

func (e *external) probersForget(mg *v1alpha1.RelayConfig) {
	if e.probers != nil {
		e.probers.forget(mg.GetUID())
	}
	forgetProbes(mg.GetNamespace(), mg.GetName())
}

// removeCondition drops a condition of typ; it says whether there was one.
func removeCondition(mg *v1alpha1.RelayConfig, typ xpv2.ConditionType) bool {
	before := len(mg.Status.Conditions)
	mg.Status.Conditions = slices.DeleteFunc(mg.Status.Conditions, func(c xpv2.Condition) bool { return c.Type == typ })
	return len(mg.Status.Conditions) != before
}
