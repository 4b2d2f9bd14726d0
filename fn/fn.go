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
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// Response TTLs: come back soon while replicas wait for endpoints or pods,
// or while Crossplane does not hear the PeerRelay's events (unresponsive);
// with realtime compositions the TTL is the only requeue.
const (
	ttlPending = 15 * time.Second
	ttlReady   = 5 * time.Minute
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
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read the observed composed resources: %w", err)
	}
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		return fmt.Errorf("cannot read the observed PeerRelay: %w", err)
	}
	pods, err := requiredPods(req)
	if err != nil {
		return err
	}
	in, err := readInputs(req, xr, observed, pods)
	if err != nil {
		return err
	}
	c, err := f.composition(in)
	if err != nil {
		return err
	}
	r := c.relay

	obs := observedState{observed: observed, pods: pods, podsRequired: needsPods(r), last: lastStatus(xr)}
	sum := summarise(r, obs)
	if r.BaseReason != "" {
		response.Normalf(rsp, "composed objects are named %s-… instead of %s-…: %s", r.Base, r.Name, r.BaseReason).TargetCompositeAndClaim()
	}

	// Earlier steps' desired resources stay as they are; ours are added.
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read the desired composed resources: %w", err)
	}
	want := map[int]string{}
	for _, o := range c.objs {
		if i, ok := indexed(o.key, keyPrefixStatefulSet); ok {
			want[i] = o.obj.GetAnnotations()[annotationPodTemplate]
		}
	}
	hold := rollout(r, obs, sum, want)
	for _, o := range c.objs {
		// The cached object itself: SetDesiredComposedResources only reads
		// it, into a new Struct.
		obj := o.obj
		if i, ok := indexed(o.key, keyPrefixStatefulSet); ok && hold[i] {
			sts, _ := obs.get(o.key)
			obj = asObserved(sts)
		}
		desired[resource.Name(o.key)] = &resource.DesiredComposed{Resource: obj, Ready: readiness(o.key, r, obs, sum)}
	}
	if len(hold) > 0 {
		f.Log.Debug("rolling out a new pod template one replica at a time", "namespace", r.Namespace, "name", r.Name, "waiting", len(hold))
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return fmt.Errorf("cannot set the desired composed resources: %w", err)
	}
	if err := setStatus(req, rsp, sum.status); err != nil {
		return err
	}
	reportTransitions(rsp, transitions(obs.last.Replicas, sum.status.Replicas))
	requirePods(rsp, r)
	requireProxyClass(rsp, r)
	requirePodMonitorCRD(rsp, r)
	for _, w := range warnings(r) {
		response.Warning(rsp, errors.New(w)).TargetCompositeAndClaim()
	}
	if c, stay := sum.devicesStay(); stay {
		// Only when devices would stay behind: a condition that is always
		// True is one more write on every PeerRelay.
		response.ConditionFalse(rsp, string(v1alpha1.ConditionDeviceCleanup), string(c.Reason)).WithMessage(c.Message).TargetCompositeAndClaim()
	}

	var cond *response.ConditionOption
	if sum.ready {
		cond = response.ConditionTrue(rsp, string(v1alpha1.ConditionPeerRelayReady), string(sum.reason))
		if !unresponsive(xr) {
			rsp.Meta.Ttl = durationpb.New(ttlReady)
		}
	} else {
		cond = response.ConditionFalse(rsp, string(v1alpha1.ConditionPeerRelayReady), string(sum.reason))
	}
	cond.WithMessage(sum.msg).TargetCompositeAndClaim()
	// Not f.Log.WithValues: that builds a logger on every call, even
	// when debug logs are off, as they are in production.
	f.Log.Debug("composed", "namespace", r.Namespace, "name", r.Name, "replicas", r.Replicas,
		"reason", string(sum.reason), "endpoints", len(sum.status.Endpoints))
	return nil
}

// composition returns what in composes, from the cache when the same
// inputs were seen before.
func (f *Function) composition(in inputs) (*composition, error) {
	k, size, err := in.key()
	if err != nil {
		return nil, err
	}
	if c := f.cache.get(k); c != nil {
		return c, nil
	}
	r, err := newRelay(in)
	if err != nil {
		return nil, err
	}
	objs := compose(r)
	c := &composition{relay: r, objs: make([]composedObject, 0, len(objs))}
	for _, o := range objs {
		cd, err := toComposed(o.obj)
		if err != nil {
			return nil, fmt.Errorf("cannot convert %s: %w", o.key, err)
		}
		c.objs = append(c.objs, composedObject{key: o.key, obj: cd})
	}
	f.cache.put(k, c, (size+fixedObjectSize)*(len(c.objs)+1))
	return c, nil
}

// newRelay reads the inputs and applies every default.
func newRelay(in inputs) (*relay, error) {
	fin := &fnv1alpha1.Input{}
	if in.Input != nil {
		// As request.GetInput reads it: strictly, unknown fields refused.
		s, err := structpb.NewStruct(in.Input)
		if err == nil {
			err = resource.AsObject(s, fin)
		}
		if err != nil {
			return nil, fmt.Errorf("input: cannot parse the function Input: %w", err)
		}
	}
	spec, err := parseSpec(in.Spec)
	if err != nil {
		return nil, specError{err: err}
	}
	if errs, awsOnly := validate(&spec); len(errs) > 0 {
		return nil, specError{err: errs.ToAggregate(), aws: awsOnly}
	}
	r, err := defaults(in, spec, fin)
	if err != nil {
		return nil, err
	}
	pc, err := readProxyClass(in, spec.ProxyClass, r.Namespace)
	if err != nil {
		return nil, err
	}
	r.ProxyClassProblem, r.proxyClassCRD = pc.problem, pc.crd
	r.podMonitorCRD = in.PodMonitorCRD
	r.existing = in.Existing
	r.Pod = layerPod(pc.pc, spec.Pod)
	if r.Pod.Image != "" {
		r.Image = r.Pod.Image
	}
	if msg := imageTooOld(r.Image); msg != "" {
		return nil, specError{err: errors.New(msg)}
	}
	if r.AWS, err = planAWS(r, fin, in.AWS); err != nil {
		return nil, err
	}
	return r, nil
}

// warnings are what the PeerRelay asks for that does not apply, each
// saying why.
func warnings(r *relay) []string {
	var out []string
	if r.ProxyClassProblem != "" {
		out = append(out, r.ProxyClassProblem)
	}
	if r.podMonitor() != nil && r.podMonitorCRD != nil && !*r.podMonitorCRD {
		out = append(out, fmt.Sprintf("no PodMonitor is composed: the PodMonitor CRD (%s, from the Prometheus Operator) is not installed; scrape the relay pods' port named %q yourself", podMonitorCRDName, metricsPortName))
	}
	for _, k := range ignoredAnnotations(r) {
		out = append(out, fmt.Sprintf("spec.service.annotations[%s] is ignored: spec.aws pins each replica's Service to its own subnet and Elastic IP", k))
	}
	if len(r.Spec.Tags) > 0 && r.AuthKey != nil {
		out = append(out, fmt.Sprintf("spec.tags is ignored while spec.authKeySecretRef is set: the devices get the tags of the key in Secret %s", r.AuthKey.Name))
	}
	return out
}

// specError marks errors in the user's spec, reported on the PeerRelay's
// PeerRelayReady condition as well as in a Fatal result.
type specError struct {
	err error
	aws bool
}

func (e specError) Error() string { return e.err.Error() }

func fail(rsp *fnv1.RunFunctionResponse, err error) {
	response.Fatal(rsp, err)
	var se specError
	if errors.As(err, &se) {
		reason := v1alpha1.ReasonSpecInvalid
		if se.aws {
			reason = v1alpha1.ReasonAWSConfigInvalid
		}
		response.ConditionFalse(rsp, string(v1alpha1.ConditionPeerRelayReady), string(reason)).WithMessage(err.Error()).TargetCompositeAndClaim()
	}
}

type keyedObject struct {
	key string
	obj runtime.Object
}

// toComposed converts a typed object without a scheme lookup. It drops the
// empty creationTimestamp and the status a typed object always marshals: a
// desired status means nothing and would only fight the real one.
func toComposed(o runtime.Object) (*composed.Unstructured, error) {
	if u, ok := o.(*unstructured.Unstructured); ok {
		cd := composed.New()
		cd.SetUnstructuredContent(u.Object)
		return cd, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	delete(m, "status")
	cd := composed.New()
	cd.SetUnstructuredContent(m)
	return cd, nil
}

// compose builds every object the PeerRelay needs: pure, spec (and what
// was observed of AWS placement) in, objects out.
func compose(r *relay) []keyedObject {
	objs := []keyedObject{
		{keyServiceAccount, serviceAccount(r)},
		{keyRole, role(r)},
	}
	if r.composable(keyRoleBinding) {
		objs = append(objs, keyedObject{keyRoleBinding, roleBinding(r)})
	}
	objs = append(objs, keyedObject{keyDisruptionBudget, disruptionBudget(r)})
	for i := range r.Replicas {
		switch {
		case !r.composable(statefulSetKey(i)):
			// Its pod would be refused until its ServiceAccount exists.
		case !r.perReplicaZones():
			objs = append(objs, keyedObject{statefulSetKey(i), replicaStatefulSet(r, i, "")})
		case r.AWS.Replicas[i].Zone != "":
			objs = append(objs, keyedObject{statefulSetKey(i), replicaStatefulSet(r, i, r.AWS.Replicas[i].Zone)})
		default:
			// A replica whose zone is not known yet waits: started anywhere,
			// it would have to move.
		}
		// A pinned Service waits for a checked placement: the AWS Load
		// Balancer Controller fixes an NLB's Elastic IPs when it creates it.
		if r.AWS == nil || r.AWS.Managed || r.AWS.Replicas[i].Use != nil {
			objs = append(objs, keyedObject{svcKey(i), service(r, i)})
		}
		objs = append(objs, keyedObject{relayConfigKey(i), relayConfig(r, i)})
		if r.AWS != nil {
			objs = append(objs, composeAWS(r, i)...)
			if u, ok := eipUsage(r, i); ok {
				objs = append(objs, u)
			}
		}
	}
	if r.podMonitor() != nil && r.podMonitorCRD != nil && *r.podMonitorCRD {
		objs = append(objs, keyedObject{keyPodMonitor, podMonitor(r)})
	}
	return objs
}
