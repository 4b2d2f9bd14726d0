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
}

// RunFunction composes one PeerRelay.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, ttlPending)

	r, err := resolve(req)
	if err != nil {
		fail(rsp, err)
		return rsp, nil
	}
	log := f.Log.WithValues("namespace", r.Namespace, "name", r.Name, "replicas", r.Replicas)

	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read desired composed resources from earlier steps: %w", err))
		return rsp, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read observed composed resources: %w", err))
		return rsp, nil
	}
	obs := observedState{observed: observed, pods: requiredPods(req), authKey: requiredAuthKey(req, r)}
	sum := summarise(r, obs)
	if r.BaseReason != "" {
		response.Normalf(rsp, "composed objects are named %s-… instead of %s-…: %s", r.Base, r.Name, r.BaseReason).TargetCompositeAndClaim()
	}

	objs := compose(r)
	for _, o := range objs {
		cd, err := toComposed(o.obj)
		if err != nil {
			response.Fatal(rsp, fmt.Errorf("cannot convert %s: %w", o.key, err))
			return rsp, nil
		}
		desired[resource.Name(o.key)] = &resource.DesiredComposed{Resource: cd, Ready: readiness(o.key, r, obs, sum)}
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set desired composed resources: %w", err))
		return rsp, nil
	}
	if err := setStatus(req, rsp, sum.status); err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	requirePods(rsp, r)
	requireAuthKey(rsp, r)

	var cond *response.ConditionOption
	if sum.ready {
		cond = response.ConditionTrue(rsp, conditionReady, sum.reason)
		rsp.Meta.Ttl = durationOf(ttlReady)
	} else {
		cond = response.ConditionFalse(rsp, conditionReady, sum.reason)
	}
	cond.WithMessage(sum.msg).TargetCompositeAndClaim()
	log.Debug("composed", "reason", sum.reason, "endpoints", len(sum.status.Endpoints))
	return rsp, nil
}

// resolve reads the Input and the XR and applies every default.
func resolve(req *fnv1.RunFunctionRequest) (*relay, error) {
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
	return defaults(xr.Resource.GetName(), xr.Resource.GetNamespace(), xr.Resource.GetLabels(), spec, in)
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

// compose builds every object the PeerRelay needs: pure, spec in, objects out.
func compose(r *relay) []keyedObject {
	objs := []keyedObject{
		{keyServiceAccount, serviceAccount(r)},
		{keyRole, role(r)},
		{keyRoleBinding, roleBinding(r)},
		{keyStatefulSet, statefulSet(r)},
	}
	for i := range r.Replicas {
		objs = append(objs,
			keyedObject{svcKey(i), service(r, i)},
			keyedObject{stateKey(i), stateSecret(r, i)},
			keyedObject{relayConfigKey(i), relayConfig(r, i)},
		)
	}
	return objs
}
