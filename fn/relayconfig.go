package fn

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	relayv1alpha1 "github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// providerReports decodes, once per call, what the provider observed of
// each composed RelayConfig, by replica: the status and the AWS plan's
// inputs both read it from here.
func providerReports(observed map[resource.Name]resource.ObservedComposed) map[int]relayv1alpha1.RelayConfigObservation {
	out := map[int]relayv1alpha1.RelayConfigObservation{}
	for key, oc := range observed {
		if i, ok := replicaIndex(string(key), keyPrefixRelayConfig); ok && string(key) == relayConfigKey(i) && oc.Resource != nil {
			out[i] = atProvider(oc.Resource)
		}
	}
	return out
}

// atProvider is what the provider observed of a composed RelayConfig; the
// zero value when it has observed nothing (yet) or its status does not
// decode.
func atProvider(rc *composed.Unstructured) relayv1alpha1.RelayConfigObservation {
	var at relayv1alpha1.RelayConfigObservation
	if err := rc.GetValueInto("status.atProvider", &at); err != nil {
		return relayv1alpha1.RelayConfigObservation{}
	}
	return at
}

// relayConfig asks the provider to resolve replica i's public endpoints and
// write its tailscaled config into R-i-config. The config refers to the auth
// key as a file the StatefulSet mounts, so it carries no credential.
func relayConfig(r *relay, i int) *relayv1alpha1.RelayConfig {
	name := replicaName(r.Base, i)
	p := relayv1alpha1.RelayConfigParameters{
		ServiceRef:       &relayv1alpha1.LocalRef{Name: name},
		ConfigSecretName: configSecretName(r.Base, i),
		Hostname:         hostname(r.Hostname, i),
		Port:             r.Port,
		StaticEndpoints:  r.Spec.StaticEndpoints,
		Tags:             r.Tags,
		StateSecretName:  name,
		Resolution:       relayv1alpha1.ResolutionAuto,
	}
	if a := r.Spec.AWS; a != nil && a.Region != "" {
		p.AWS = &relayv1alpha1.AWSResolution{Region: a.Region}
	}
	if r.AWS != nil {
		rp := r.AWS.Replicas[i]
		// The provider checks the placement the spec wants before the
		// function applies it (see awsplan.go).
		p.AWS = &relayv1alpha1.AWSResolution{Region: r.AWS.Region, SubnetID: rp.Want.SubnetID, AllocationID: rp.Want.AllocationID}
		if r.AWS.Managed {
			// No Service ingress to follow: the load balancer is ours, found by name.
			p.ServiceRef = nil
			p.Resolution = relayv1alpha1.ResolutionAWS
			p.AWS.LoadBalancerName = rp.LoadBalancerName
		}
	}
	if mode := r.nodeMode(); mode != "" {
		// Reached on its pod's node: the provider advertises that node.
		p.Node = &relayv1alpha1.NodeEndpoint{Pod: podName(r, i), Mode: mode}
	}
	if r.metrics() {
		// The pod serves its relay counters: the provider samples them
		// into the replica's status.
		p.Traffic = &relayv1alpha1.TrafficSource{Pod: podName(r, i), Port: healthCheckPort}
	}
	if r.AuthKey != nil {
		p.AuthKeySecretRef = &relayv1alpha1.AuthKeyRef{
			Name: r.AuthKey.Name, Key: r.AuthKey.Key,
			Mode: relayv1alpha1.AuthKeyModeFile, MountPath: authKeyMountPath(),
		}
	}
	om := meta(r, name, replicaLabels(r, i))
	om.Finalizers = []string{relayv1alpha1.Finalizer}
	return &relayv1alpha1.RelayConfig{
		TypeMeta: metav1.TypeMeta{
			APIVersion: relayv1alpha1.GroupVersion.String(), Kind: relayv1alpha1.RelayConfigKind,
		},
		ObjectMeta: om,
		Spec: relayv1alpha1.RelayConfigSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference: &xpv2.ProviderConfigReference{
					Kind: r.ProviderConfig.Kind, Name: r.ProviderConfig.Name,
				},
			},
			ForProvider: p,
		},
	}
}
