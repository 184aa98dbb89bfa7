// Package metrics describes metrics.k8s.io/v1beta1, the resource metrics API that
// metrics-server serves on a Kubernetes cluster and `kubectl top` and the
// HorizontalPodAutoscaler read: NodeMetrics and PodMetrics. They are read-only
// (get, list) and never stored; the API server answers them from the nodes' usage
// (internal/metrics).
package metrics

import (
	"k8s.io/apimachinery/pkg/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/tranche/tranche/internal/registry"
)

// readOnly is the verb set of both resources, as metrics-server serves them.
var readOnly = []string{"get", "list"}

// NodeMetricsResource returns NodeMetrics: cluster-scoped, named after its node.
func NodeMetricsResource() registry.Resource {
	return registry.Resource{
		GVK:      metricsv1beta1.SchemeGroupVersion.WithKind("NodeMetrics"),
		Plural:   "nodes",
		Verbs:    readOnly,
		New:      func() runtime.Object { return &metricsv1beta1.NodeMetrics{} },
		NewList:  func() runtime.Object { return &metricsv1beta1.NodeMetricsList{} },
		Computed: true,
	}
}

// PodMetricsResource returns PodMetrics: namespaced, named after its pod.
func PodMetricsResource() registry.Resource {
	return registry.Resource{
		GVK:        metricsv1beta1.SchemeGroupVersion.WithKind("PodMetrics"),
		Plural:     "pods",
		Namespaced: true,
		Verbs:      readOnly,
		New:        func() runtime.Object { return &metricsv1beta1.PodMetrics{} },
		NewList:    func() runtime.Object { return &metricsv1beta1.PodMetricsList{} },
		Computed:   true,
	}
}
