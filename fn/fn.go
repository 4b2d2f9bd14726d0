// Package fn is function-peerrelay: it expands a PeerRelay into the objects
// that make N tailnet peer relays reachable on public UDP endpoints, and
// reads back what the cluster and the provider observed into the PeerRelay's
// status. It is pure: the same request always gives the same response.
package fn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// Response TTLs, Crossplane's only requeue of an XR with realtime
// compositions. Every input is watched (composed resources, required pods
// and ProxyClass), so the TTL is a backstop:
//   - ttlPending: soon, while replicas wait for endpoints or pods;
//   - ttlReady: a ready PeerRelay whose events Crossplane hears is composed
//     again only when something changes, or on Crossplane's informer resync
//     (--sync-interval, 1h): each pass re-applies every composed object;
//   - ttlUnheard: a ready PeerRelay whose watch circuit breaker is open
//     (Responsive=False): Crossplane may drop a change (a scale, say), and
//     no later event may come to carry it. Not ttlPending: the breaker
//     stays open until an event comes, at rest possibly for hours.
const (
	ttlPending = 15 * time.Second
	ttlReady   = time.Hour
	ttlUnheard = time.Minute
)

// Function runs the PeerRelay composition step.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	Log logging.Logger

	cache compositionCache
}

// RunFunction composes one PeerRelay.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, ttlPending)
	if err := f.run(req, rsp); err != nil {
		fail(rsp, err)
	}
	return rsp, nil
}

func (f *Function) run(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) error {
	xr, obs, in, err := observe(req)
	if err != nil {
		return err
	}
	c, err := f.composition(in)
	if err != nil {
		return err
	}
	r := c.relay
	obs.podsRequired = needsPods(r)
	obs.awsKeys = c.awsKeys
	sum := summarise(r, obs)
	if r.BaseReason != "" {
		response.Normalf(rsp, "composed objects are named %s-… instead of %s-…: %s", r.Base, r.Name, r.BaseReason).TargetCompositeAndClaim()
	}
	if err := f.desire(req, rsp, c, obs, sum); err != nil {
		return err
	}
	if err := setStatus(req, rsp, sum); err != nil {
		return err
	}
	reportTransitions(rsp, transitions(obs.last.Replicas, sum.status.Replicas))
	requirePods(rsp, r)
	requireProxyClass(rsp, r)
	requirePodMonitorCRD(rsp, r)
	for _, w := range warnings(r) {
		response.Warning(rsp, errors.New(w)).TargetCompositeAndClaim()
	}
	setConditions(rsp, xr, sum)
	// Not f.Log.WithValues: that builds a logger on every call, even
	// when debug logs are off, as they are in production.
	f.Log.Debug("composed", "namespace", r.Namespace, "name", r.Name, "replicas", r.Replicas,
		"reason", string(sum.reason), "endpoints", len(sum.status.Endpoints))
	return nil
}

// observe reads what Crossplane sent once: the PeerRelay, its composed
// resources and pods, for the status (observedState) and for the
// composition's inputs.
func observe(req *fnv1.RunFunctionRequest) (*resource.Composite, observedState, inputs, error) {
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return nil, observedState{}, inputs{}, fmt.Errorf("cannot read the observed composed resources: %w", err)
	}
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		return nil, observedState{}, inputs{}, fmt.Errorf("cannot read the observed PeerRelay: %w", err)
	}
	pods, err := requiredPods(req)
	if err != nil {
		return nil, observedState{}, inputs{}, err
	}
	obs := observedState{observed: observed, pods: pods, reports: providerReports(observed), last: lastStatus(xr)}
	in, err := readInputs(req, xr, obs)
	if err != nil {
		return nil, observedState{}, inputs{}, err
	}
	return xr, obs, in, nil
}

// desire adds the composition's objects to the desired composed resources
// (earlier steps' stay as they are), each StatefulSet held at what it runs
// while another replica rolls out.
func (f *Function) desire(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, c *composition, obs observedState, sum summary) error {
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read the desired composed resources: %w", err)
	}
	r := c.relay
	want := map[int]string{}
	for _, o := range c.objs {
		if i, ok := replicaIndex(o.key, keyPrefixStatefulSet); ok {
			want[i] = o.templateHash
		}
	}
	hold := rollout(r, obs, sum, want)
	for _, o := range c.objs {
		if o.key == keyDisruptionBudget && !disruptionBudgetDue(r, obs, sum) {
			continue
		}
		// The cached object itself: SetDesiredComposedResources only reads
		// it, into a new Struct.
		obj := o.obj
		if i, ok := replicaIndex(o.key, keyPrefixStatefulSet); ok && hold[i] {
			sts, _ := obs.get(o.key)
			obj = asObserved(sts)
		}
		// Ready: the PeerRelay's readiness is the function's own (setStatus),
		// so Crossplane reads a composed resource's only to send an event
		// per unready resource per pass, and the XR's Ready message would
		// list them anew on every pass: writes, events and watch events
		// that say less than PeerRelayReady's message already does.
		desired[resource.Name(o.key)] = &resource.DesiredComposed{Resource: obj, Ready: resource.ReadyTrue}
	}
	if len(hold) > 0 {
		f.Log.Debug("rolling out a new pod template one replica at a time", "namespace", r.Namespace, "name", r.Name, "waiting", len(hold))
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return fmt.Errorf("cannot set the desired composed resources: %w", err)
	}
	return nil
}

// setConditions sets PeerRelayReady, and the response's TTL: long once the
// PeerRelay is ready and Crossplane hears its events. DeviceCleanup only
// when devices would stay behind: a condition that is always True is one
// more write on every PeerRelay.
func setConditions(rsp *fnv1.RunFunctionResponse, xr *resource.Composite, sum summary) {
	if c, stay := sum.devicesStay(); stay {
		response.ConditionFalse(rsp, string(v1alpha1.ConditionDeviceCleanup), string(c.Reason)).WithMessage(c.Message).TargetCompositeAndClaim()
	}
	var cond *response.ConditionOption
	if sum.ready {
		cond = response.ConditionTrue(rsp, string(v1alpha1.ConditionPeerRelayReady), string(sum.reason))
		rsp.Meta.Ttl = durationpb.New(ttlReady)
		if unresponsive(xr) {
			rsp.Meta.Ttl = durationpb.New(ttlUnheard)
		}
	} else {
		cond = response.ConditionFalse(rsp, string(v1alpha1.ConditionPeerRelayReady), string(sum.reason))
	}
	cond.WithMessage(sum.msg).TargetCompositeAndClaim()
}
