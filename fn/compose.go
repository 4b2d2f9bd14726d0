package fn

import (
	"errors"
	"fmt"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fnv1alpha1 "github.com/peerrelay/peerrelay/apis/fn/v1alpha1"
)

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
		co := composedObject{key: o.key, obj: cd}
		if sts, ok := o.obj.(*appsv1.StatefulSet); ok {
			co.templateHash = sts.Annotations[annotationPodTemplate]
		}
		c.objs = append(c.objs, co)
	}
	c.awsKeys = awsKeysByReplica(c.objs)
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
