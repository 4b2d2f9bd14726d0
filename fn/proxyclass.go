package fn

import (
	"cmp"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerrelay/peerrelay/apis/peerrelay/v1alpha1"
)

// The ProxyClass is looked up in two steps: its CRD first, then the
// ProxyClass itself. A required resource of a kind the API server does not
// serve fails the whole composition, and the Tailscale operator, which
// brings the ProxyClass CRD, need not be installed.
const proxyClassCRDName = "proxyclasses.tailscale.com"

// annotationProxyClassNamespaces, on a ProxyClass, lists the namespaces
// whose PeerRelays may use it (comma-separated, or "*" for every one).
// The operator runs its proxies in its own namespace; a PeerRelay's
// StatefulSet is in the tenant's, readable there, so a ProxyClass (its
// env, its priority class, its tolerations) is a grant from the platform
// team, never taken by naming it.
const annotationProxyClassNamespaces = "peerrelay.io/namespaces"

// proxyClass is the part of a Tailscale operator ProxyClass
// (tailscale.com/v1alpha1) that shapes a relay pod. Declared here rather
// than imported: the operator's API package would bring its whole
// dependency tree into the function.
type proxyClass struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		StatefulSet *struct {
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
			Pod         *struct {
				Labels                    map[string]string                 `json:"labels,omitempty"`
				Annotations               map[string]string                 `json:"annotations,omitempty"`
				Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
				SecurityContext           *corev1.PodSecurityContext        `json:"securityContext,omitempty"`
				ImagePullSecrets          []corev1.LocalObjectReference     `json:"imagePullSecrets,omitempty"`
				NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
				Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
				TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
				PriorityClassName         string                            `json:"priorityClassName,omitempty"`
				NodeName                  string                            `json:"nodeName,omitempty"`
				DNSPolicy                 *corev1.DNSPolicy                 `json:"dnsPolicy,omitempty"`
				DNSConfig                 *corev1.PodDNSConfig              `json:"dnsConfig,omitempty"`
				TailscaleContainer        *struct {
					Image           string                      `json:"image,omitempty"`
					ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy,omitempty"`
					Resources       corev1.ResourceRequirements `json:"resources,omitempty"`
					SecurityContext *corev1.SecurityContext     `json:"securityContext,omitempty"`
					Env             []struct {
						Name  string `json:"name"`
						Value string `json:"value,omitempty"`
					} `json:"env,omitempty"`
				} `json:"tailscaleContainer,omitempty"`
			} `json:"pod,omitempty"`
		} `json:"statefulSet,omitempty"`
		Metrics *struct {
			Enable         bool `json:"enable"`
			ServiceMonitor *struct {
				Enable bool              `json:"enable"`
				Labels map[string]string `json:"labels,omitempty"`
			} `json:"serviceMonitor,omitempty"`
		} `json:"metrics,omitempty"`
	} `json:"spec"`
}

// podSettings is what shapes the relay pods once the ProxyClass and the
// PeerRelay's spec.pod are layered: spec.pod wins field by field.
type podSettings struct {
	v1alpha1.PodSpec
	// From the ProxyClass only, as the Tailscale operator applies them.
	StatefulSetLabels, StatefulSetAnnotations map[string]string
	PodSecurityContext                        *corev1.PodSecurityContext
	TopologySpreadConstraints                 []corev1.TopologySpreadConstraint
	PriorityClassName                         string
	NodeName                                  string
	DNSPolicy                                 corev1.DNSPolicy
	DNSConfig                                 *corev1.PodDNSConfig
	ImagePullPolicy                           corev1.PullPolicy
	Env                                       []corev1.EnvVar
	// Metrics: the ProxyClass's spec.metrics.enable.
	Metrics bool
	// Monitor: the ProxyClass's spec.metrics.serviceMonitor, which asks
	// for a PodMonitor here (a PeerRelay has no metrics Service).
	Monitor *v1alpha1.PodMonitor
}

// proxyClassLookup is what Crossplane supplied of spec.proxyClass.
type proxyClassLookup struct {
	pc *proxyClass
	// crd is true once the ProxyClass CRD is known to exist.
	crd bool
	// problem says why no ProxyClass applies, once that is known.
	problem string
}

// readProxyClass reads the ProxyClass spec.proxyClass names, as far as
// Crossplane has supplied it, for a PeerRelay in namespace.
func readProxyClass(in inputs, name, namespace string) (proxyClassLookup, error) {
	switch {
	case name == "" || in.ProxyClassCRD == nil:
		return proxyClassLookup{}, nil // none, or not looked up yet
	case !*in.ProxyClassCRD:
		return proxyClassLookup{problem: fmt.Sprintf("spec.proxyClass names ProxyClass %q, but the ProxyClass CRD (%s, from the Tailscale operator) is not installed: the relay pods use the defaults and spec.pod", name, proxyClassCRDName)}, nil
	case in.ProxyClasses == nil:
		return proxyClassLookup{crd: true}, nil // not looked up yet
	case len(in.ProxyClasses) == 0:
		return proxyClassLookup{crd: true, problem: fmt.Sprintf("ProxyClass %q named by spec.proxyClass does not exist: the relay pods use the defaults and spec.pod", name)}, nil
	}
	pc := &proxyClass{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(in.ProxyClasses[0], pc); err != nil {
		return proxyClassLookup{}, fmt.Errorf("ProxyClass %s named by spec.proxyClass: %w", name, err)
	}
	if !offered(pc.Metadata.Annotations[annotationProxyClassNamespaces], namespace) {
		return proxyClassLookup{crd: true, problem: fmt.Sprintf("ProxyClass %q named by spec.proxyClass is not offered to namespace %s: the platform team lists the namespaces that may use it in its annotation %s (or \"*\"), since its settings and env are copied into a StatefulSet this namespace reads; the relay pods use the defaults and spec.pod", name, namespace, annotationProxyClassNamespaces)}, nil
	}
	return proxyClassLookup{pc: pc, crd: true}, nil
}

// offered says whether list (a ProxyClass's annotationProxyClassNamespaces)
// names namespace, or is "*".
func offered(list, namespace string) bool {
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n == "*" || n == namespace {
			return true
		}
	}
	return false
}

// layerPod applies the ProxyClass, then spec.pod on top.
func layerPod(pc *proxyClass, spec *v1alpha1.PodSpec) podSettings {
	var s podSettings
	s.Metrics = pc != nil && pc.Spec.Metrics != nil && pc.Spec.Metrics.Enable
	if s.Metrics && pc.Spec.Metrics.ServiceMonitor != nil {
		s.Monitor = &v1alpha1.PodMonitor{Enable: pc.Spec.Metrics.ServiceMonitor.Enable, Labels: pc.Spec.Metrics.ServiceMonitor.Labels}
	}
	if pc != nil && pc.Spec.StatefulSet != nil {
		s.StatefulSetLabels, s.StatefulSetAnnotations = pc.Spec.StatefulSet.Labels, pc.Spec.StatefulSet.Annotations
	}
	if pc != nil && pc.Spec.StatefulSet != nil && pc.Spec.StatefulSet.Pod != nil {
		p := pc.Spec.StatefulSet.Pod
		s.Labels, s.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
		s.Affinity, s.NodeSelector, s.Tolerations, s.ImagePullSecrets = p.Affinity, p.NodeSelector, p.Tolerations, p.ImagePullSecrets
		s.PodSecurityContext, s.TopologySpreadConstraints, s.PriorityClassName = p.SecurityContext, p.TopologySpreadConstraints, p.PriorityClassName
		s.NodeName, s.DNSConfig = p.NodeName, p.DNSConfig
		if p.DNSPolicy != nil {
			s.DNSPolicy = *p.DNSPolicy
		}
		if c := p.TailscaleContainer; c != nil {
			s.Image, s.SecurityContext, s.ImagePullPolicy = c.Image, c.SecurityContext, c.ImagePullPolicy
			if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
				res := c.Resources
				s.Resources = &res
			}
			for _, e := range c.Env {
				s.Env = append(s.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			}
		}
	}
	if spec == nil {
		return s
	}
	if s.Labels == nil && len(spec.Labels) > 0 {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, spec.Labels)
	if s.Annotations == nil && len(spec.Annotations) > 0 {
		s.Annotations = map[string]string{}
	}
	maps.Copy(s.Annotations, spec.Annotations)
	if spec.Image != "" {
		s.Image = spec.Image
	}
	// A field spec.pod sets (non-nil, even empty) wins.
	s.NodeSelector = orMap(spec.NodeSelector, s.NodeSelector)
	s.Tolerations = orSlice(spec.Tolerations, s.Tolerations)
	s.Affinity = cmp.Or(spec.Affinity, s.Affinity)
	s.Resources = cmp.Or(spec.Resources, s.Resources)
	s.ImagePullSecrets = orSlice(spec.ImagePullSecrets, s.ImagePullSecrets)
	s.SecurityContext = cmp.Or(spec.SecurityContext, s.SecurityContext)
	return s
}

// orSlice is v when it is set (non-nil, even empty), else def.
func orSlice[E any](v, def []E) []E {
	if v != nil {
		return v
	}
	return def
}

// orMap is v when it is set (non-nil, even empty), else def.
func orMap[K comparable, V any](v, def map[K]V) map[K]V {
	if v != nil {
		return v
	}
	return def
}
