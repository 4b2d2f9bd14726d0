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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
)

// Response TTLs: come back soon while replicas wait for endpoints or pods.
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
	return f.run(req, false), nil
}

// run composes one PeerRelay. With encoded, the composed objects are
// written into the desired State from their cached encodings, which only a
// gRPC server may send (see wire.go).
func (f *Function) run(req *fnv1.RunFunctionRequest, encoded bool) *fnv1.RunFunctionResponse {
	rsp := response.To(req, ttlPending)

	c, err := f.composition(req)
	if err != nil {
		fail(rsp, err)
		return rsp
	}
	r := c.relay

	obs := observedState{observed: req.GetObserved().GetResources(), pods: requiredPods(req), authKey: requiredAuthKey(req, r)}
	sum := summarise(r, obs)
	if r.BaseReason != "" {
		response.Normalf(rsp, "composed objects are named %s-… instead of %s-…: %s", r.Base, r.Name, r.BaseReason).TargetCompositeAndClaim()
	}

	// Earlier steps' desired resources stay as they are; ours are added.
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	ready := func(key string) fnv1.Ready { return protoReady(readiness(key, r, obs, sum)) }
	if encoded {
		appendEncoded(rsp.Desired, c.objs, ready)
	} else {
		if rsp.Desired.Resources == nil {
			rsp.Desired.Resources = make(map[string]*fnv1.Resource, len(c.objs))
		}
		for _, o := range c.objs {
			obj, err := o.decode()
			if err != nil {
				response.Fatal(rsp, err)
				return rsp
			}
			rsp.Desired.Resources[o.key] = &fnv1.Resource{Resource: obj, Ready: ready(o.key)}
		}
	}
	if err := setStatus(rsp, sum.status, encoded); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	requirePods(rsp, r)
	requireAuthKey(rsp, r)
	requireProxyClass(rsp, r)
	if r.ProxyClassProblem != "" {
		response.Warning(rsp, errors.New(r.ProxyClassProblem)).TargetCompositeAndClaim()
	}

	var cond *response.ConditionOption
	if sum.ready {
		cond = response.ConditionTrue(rsp, conditionReady, sum.reason)
		rsp.Meta.Ttl = durationOf(ttlReady)
	} else {
		cond = response.ConditionFalse(rsp, conditionReady, sum.reason)
	}
	cond.WithMessage(sum.msg).TargetCompositeAndClaim()
	// Not f.Log.WithValues: that builds a logger on every call, even
	// when debug logs are off, as they are in production.
	f.Log.Debug("composed", "namespace", r.Namespace, "name", r.Name, "replicas", r.Replicas,
		"reason", sum.reason, "endpoints", len(sum.status.Endpoints))
	return rsp
}

// composition returns what the request's PeerRelay composes, from the
// cache when the same spec was seen before.
func (f *Function) composition(req *fnv1.RunFunctionRequest) (*composition, error) {
	aws := observeAWS(req)
	k := cacheKey(req, aws)
	if c := f.cache.get(k); c != nil {
		return c, nil
	}
	r, err := resolve(req, aws)
	if err != nil {
		return nil, err
	}
	objs := compose(r)
	c := &composition{relay: r, objs: make([]cachedObject, 0, len(objs))}
	for _, o := range objs {
		cd, err := toComposed(o.obj)
		if err != nil {
			return nil, fmt.Errorf("cannot convert %s: %w", o.key, err)
		}
		s, err := structpb.NewStruct(cd.Object)
		if err != nil {
			return nil, fmt.Errorf("cannot convert %s: %w", o.key, err)
		}
		w, err := proto.Marshal(s) // kept encoded: see wire.go
		if err != nil {
			return nil, fmt.Errorf("cannot encode %s: %w", o.key, err)
		}
		c.objs = append(c.objs, cachedObject{key: o.key, wire: w})
	}
	f.cache.put(k, c)
	return c, nil
}

func protoReady(r resource.Ready) fnv1.Ready {
	switch r {
	case resource.ReadyTrue:
		return fnv1.Ready_READY_TRUE
	case resource.ReadyFalse:
		return fnv1.Ready_READY_FALSE
	}
	return fnv1.Ready_READY_UNSPECIFIED
}

// resolve reads the Input and the XR and applies every default.
func resolve(req *fnv1.RunFunctionRequest, aws *awsObserved) (*relay, error) {
	in := &fnv1alpha1.Input{}
	if req.GetInput() != nil {
		if err := request.GetInput(req, in); err != nil {
			return nil, fmt.Errorf("input: cannot parse the function Input: %w", err)
		}
	}
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read the observed PeerRelay: %w", err)
	}
	spec, err := parseSpec(xr.Resource)
	if err != nil {
		return nil, specError{err: err}
	}
	if errs, awsOnly := validate(&spec); len(errs) > 0 {
		return nil, specError{err: errs, aws: awsOnly}
	}
	r, err := defaults(xr.Resource.GetName(), xr.Resource.GetNamespace(), xr.Resource.GetLabels(), spec, in)
	if err != nil {
		return nil, err
	}
	pc, err := readProxyClass(req, spec.ProxyClass)
	if err != nil {
		return nil, err
	}
	r.ProxyClassProblem, r.proxyClassCRD = pc.problem, pc.crd
	if r.AWS, err = planAWS(r, in, aws); err != nil {
		return nil, err
	}
	r.Pod = layerPod(pc.pc, spec.Pod)
	if r.Pod.Image != "" {
		r.Image = r.Pod.Image
	}
	return r, nil
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
		reason := reasonSpecInvalid
		if se.aws {
			reason = reasonAWSConfigInvalid
		}
		response.ConditionFalse(rsp, conditionReady, reason).WithMessage(err.Error()).TargetCompositeAndClaim()
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
		{keyRoleBinding, roleBinding(r)},
	}
	for i := range r.Replicas {
		switch {
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
		}
	}
	return objs
}
