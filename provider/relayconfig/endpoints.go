package relayconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"tailscale.com/ipn"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/endpoint"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tsconfig"
)

// endpointsFound is what observeEndpoints found.
type endpointsFound struct {
	// eps is what the config advertises.
	eps []netip.AddrPort
	// config is the config Secret now; nil when it is missing.
	config *corev1.Secret
	// resolveErr and checkErr are a failed lookup and a failed placement
	// check, reported once the config is written (compare).
	resolveErr, checkErr error
	// viaKubeProxy are the Service's load balancer addresses that
	// kube-proxy serves itself (servedByKubeProxy).
	viaKubeProxy []netip.Addr
}

// observeEndpoints resolves the replica's public endpoints (its Service's
// load balancer, its node, or AWS) and picks what the config advertises:
// what the lookup found, else the last good endpoints.
func (e *external) observeEndpoints(ctx context.Context, mg *v1alpha1.RelayConfig) (endpointsFound, error) {
	p := mg.Spec.ForProvider
	svc, err := e.service(ctx, mg)
	if err != nil {
		return endpointsFound{}, err
	}
	found := endpointsFound{checkErr: e.checkPlacement(ctx, mg), viaKubeProxy: servedByKubeProxy(svc)}
	start := time.Now()
	var res resolve.Result
	if p.Node != nil {
		res, found.resolveErr = e.nodeEndpoints(ctx, mg, svc)
	} else {
		res, found.resolveErr = e.resolver.Resolve(ctx, svc, p)
	}
	observeResolve(start, found.resolveErr)
	if found.config, err = e.configSecret(ctx, mg); err != nil {
		return endpointsFound{}, err
	}
	found.eps = advertise(mg, res, found.resolveErr, keptEndpoints(lastGood(mg, found.config), p))
	return found, nil
}

// advertise returns what the config advertises after a lookup that found
// res (or failed with resolveErr), with last the last good endpoints, and
// says why in EndpointsResolved. status.atProvider.endpoints is what the
// config advertises, the last good list included: the config Secret is
// restored from it when it is lost during an outage.
func advertise(mg *v1alpha1.RelayConfig, res resolve.Result, resolveErr error, last []netip.AddrPort) []netip.AddrPort {
	p := mg.Spec.ForProvider
	eps := res.Endpoints
	switch {
	case resolveErr != nil:
		eps = last
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonResolveFailed,
			fmt.Sprintf("%s; still advertising the last good endpoints %v", stableMessage(resolveErr), endpoint.Strings(last))))
	case len(eps) == 0 && len(last) > 0:
		// The ingress went away (the load balancer is being replaced, say):
		// keep advertising what was last known rather than nothing.
		eps = last
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonAwaitingAddress,
			"the Service has no load balancer address now; still advertising the last good endpoints"))
	case len(eps) == 0 && p.Node != nil:
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonAwaitingAddress,
			fmt.Sprintf("waiting for pod %s to run on a node with an address (and, for a NodePort, for the Service's node port)", p.Node.Pod)))
	case len(eps) == 0:
		mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionFalse, v1alpha1.ReasonAwaitingAddress,
			"waiting for the Service's load balancer address"))
	default:
		eps = shrinkSlowly(mg, res, last)
		recordResolved(mg, res, eps)
	}
	if advertised := endpoint.Strings(eps); !slices.Equal(mg.Status.AtProvider.Endpoints, advertised) {
		mg.Status.AtProvider.Endpoints = advertised
	}
	return eps
}

// servedByKubeProxy are the load balancer IPs of a LoadBalancer Service
// whose ipMode is VIP, or unset as MetalLB and most IP-based load
// balancers leave it: kube-proxy answers for them inside the cluster, so
// a packet from the provider's pod to one goes straight to the Service's
// pods and never crosses the load balancer (KEP-1860). An ingress named by
// a hostname (AWS's NLBs) or with ipMode Proxy is crossed.
func servedByKubeProxy(svc *corev1.Service) []netip.Addr {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		a, err := netip.ParseAddr(in.IP)
		if err != nil || (in.IPMode != nil && *in.IPMode != corev1.LoadBalancerIPModeVIP) {
			continue
		}
		out = append(out, a.Unmap())
	}
	return out
}

// configSecret returns the config Secret, or nil when there is none.
func (e *external) configSecret(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.Spec.ForProvider.ConfigSecretName}, s)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get config Secret %s: %w", mg.Spec.ForProvider.ConfigSecretName, err)
	}
	return s, nil
}

// lastGood is what the replica advertises now: the endpoints in its config
// Secret when it has one (the status may lag behind a write), else those
// recorded in status.
func lastGood(mg *v1alpha1.RelayConfig, s *corev1.Secret) []netip.AddrPort {
	if s != nil && metav1.IsControlledBy(s, mg) {
		var c ipn.ConfigVAlpha
		if json.Unmarshal(s.Data[tsconfig.FileName], &c) == nil && len(c.RelayServerStaticEndpoints) > 0 {
			return c.RelayServerStaticEndpoints
		}
	}
	eps, _ := endpoint.Parse("status.atProvider.endpoints", mg.Status.AtProvider.Endpoints)
	return eps
}

// keptEndpoints is what a replica goes on advertising while its lookup fails or its
// load balancer has no address: the last good addresses on today's port
// (spec.forProvider.port may have changed since they were resolved), and
// today's static endpoints as they are.
func keptEndpoints(last []netip.AddrPort, p v1alpha1.RelayConfigParameters) []netip.AddrPort {
	if len(last) == 0 {
		return nil
	}
	static, _ := endpoint.ParseStatic("spec.forProvider.staticEndpoints", p.StaticEndpoints)
	out := slices.Clone(static)
	for _, ep := range last {
		if !slices.ContainsFunc(static, func(s netip.AddrPort) bool { return s.Addr() == ep.Addr() }) {
			out = append(out, netip.AddrPortFrom(ep.Addr(), uint16(p.Port)))
		}
	}
	return endpoint.Normalize(out)
}

// shrinkGrace is how long addresses a hostname's answer leaves out stay
// advertised: an NLB's name answers one address per zone, and a resolver's
// partial answer would otherwise drop a zone, then add it back, each time
// rewriting the config. An address really gone is dropped at the first
// lookup after the grace.
const shrinkGrace = 2 * time.Minute

// shrinkSlowly returns what to advertise from a successful lookup: its
// endpoints, except while the answer for the same hostname lacks some of
// the last good ones, for up to shrinkGrace (status.atProvider.
// shrinkingSince records since when).
func shrinkSlowly(mg *v1alpha1.RelayConfig, res resolve.Result, last []netip.AddrPort) []netip.AddrPort {
	at := &mg.Status.AtProvider
	partial := res.Hostname != "" && res.Hostname == at.Hostname && len(res.Endpoints) < len(last) &&
		!slices.ContainsFunc(res.Endpoints, func(ep netip.AddrPort) bool { return !slices.Contains(last, ep) })
	switch {
	case !partial:
		at.ShrinkingSince = nil
	case at.ShrinkingSince == nil:
		now := metav1.Now()
		at.ShrinkingSince = &now
		return last
	case time.Since(at.ShrinkingSince.Time) < shrinkGrace:
		return last
	default:
		at.ShrinkingSince = nil
	}
	return res.Endpoints
}

// recordResolved records a successful lookup, and advertised, what comes of
// it, in status.
func recordResolved(mg *v1alpha1.RelayConfig, res resolve.Result, advertised []netip.AddrPort) {
	eps := endpoint.Strings(advertised)
	at := &mg.Status.AtProvider
	if !slices.Equal(at.Endpoints, eps) || at.Source != res.Source || at.Hostname != res.Hostname {
		now := metav1.Now()
		at.Endpoints, at.Source, at.Hostname, at.LastResolved = eps, res.Source, res.Hostname, &now
	}
	msg := fmt.Sprintf("%d endpoints from %s", len(eps), res.Source)
	if res.Source == v1alpha1.SourceNodeInternalIP {
		msg += "; the pod's node has no ExternalIP, so its InternalIP is advertised: peers reach it only where that network is routed (a port forward to it, a VPN)"
	}
	if at.ShrinkingSince != nil {
		msg += fmt.Sprintf("; %s answers only %d of them now, the others stay advertised for %s in case the answer was partial", res.Hostname, len(res.Endpoints), shrinkGrace)
	}
	mg.SetConditions(condition(v1alpha1.ConditionResolved, corev1.ConditionTrue, v1alpha1.ReasonResolved, msg))
}

func (e *external) service(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Service, error) {
	ref := mg.Spec.ForProvider.ServiceRef
	if ref == nil {
		return nil, nil
	}
	svc := &corev1.Service{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, svc)
	if kerrors.IsNotFound(err) {
		return nil, nil // not created yet: pending, like no ingress
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get Service %s named by spec.forProvider.serviceRef: %w", ref.Name, err)
	}
	return svc, nil
}
