package hpa

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// MetricsClient reads the resource metrics API (metrics.k8s.io/v1beta1) for the
// controller. An implementation returns an error when the API answers with one, and may
// return an empty list.
type MetricsClient interface {
	// PodMetrics lists the usage of the pods selector picks in namespace.
	PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error)
}

var errNotServed = errors.New("the server could not find the requested resource (get pods.metrics.k8s.io)")

// NewMetricsClient reads PodMetrics through the API server with k8s.io/metrics' clientset,
// as kube-controller-manager does.
func NewMetricsClient(c metricsclient.Interface) MetricsClient { return apiMetrics{c} }

type apiMetrics struct{ c metricsclient.Interface }

func (m apiMetrics) PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	list, err := m.c.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if apierrors.IsNotFound(err) {
		// A collection is never "not found": the API itself is not served. Say so in the
		// words a cluster without metrics-server uses, whatever the 404's body was.
		return nil, errNotServed
	}
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// fetchPodMetrics wraps the client's answer the way Kubernetes words it in conditions and
// events ("unable to fetch metrics from resource metrics API: ...").
func fetchPodMetrics(ctx context.Context, c MetricsClient, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	items, err := c.PodMetrics(ctx, namespace, selector)
	if err != nil {
		return nil, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(items) == 0 {
		return nil, errors.New("no metrics returned from resource metrics API")
	}
	return items, nil
}
