// Package tools pins the Prometheus Operator's API types, from which the
// tests generate its CRDs (PodMonitor, ServiceMonitor) with controller-gen:
// the CRDs a cluster with the Prometheus Operator serves.
package tools

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
