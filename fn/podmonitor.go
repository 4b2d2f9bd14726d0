package fn

import (
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// podMonitorSampleLimit bounds the samples one scrape of a relay pod may
// bring.
const podMonitorSampleLimit = 2000

// podMonitorCRDName is the Prometheus Operator's PodMonitor CRD.
const podMonitorCRDName = "podmonitors.monitoring.coreos.com"

// podMonitor is a Prometheus Operator PodMonitor for the relay pods' port
// named "metrics": one per PeerRelay, selecting its pods by the labels the
// StatefulSets select them by. Unstructured: the Prometheus Operator's
// Go module would pull a newer controller-runtime than the one we build
// with, for one small object.
func podMonitor(r *relay) *unstructured.Unstructured {
	m := meta(r, r.Base, commonLabels(r))
	labels := maps.Clone(r.podMonitor().Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, m.Labels) // ours win: Crossplane depends on them
	metadata := map[string]any{"name": m.Name, "labels": toAny(labels)}
	if m.Namespace != "" {
		metadata["namespace"] = m.Namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PodMonitor",
		"metadata":   metadata,
		"spec": map[string]any{
			"selector":            map[string]any{"matchLabels": toAny(selectorLabels(r))},
			"podMetricsEndpoints": []any{map[string]any{"port": metricsPortName, "path": "/metrics"}},
			// The pods run in a tenant's namespace, from an image it may
			// choose: a scrape past this many samples is dropped, so a pod
			// cannot flood the platform's Prometheus. tailscaled serves
			// about a hundred.
			"sampleLimit": int64(podMonitorSampleLimit),
		},
	}}
}
