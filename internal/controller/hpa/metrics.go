package hpa

import (
	"context"
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	externalmetrics "k8s.io/metrics/pkg/client/external_metrics"
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

// ExternalMetricsClient reads the external metrics API (external.metrics.k8s.io/v1beta1)
// for the controller: the milli-values of the series of metric name that selector picks
// in namespace.
type ExternalMetricsClient interface {
	ExternalMetric(ctx context.Context, namespace, name string, selector labels.Selector) ([]int64, error)
}

// NewExternalMetricsClient reads external metrics through the API server with
// k8s.io/metrics' client, as kube-controller-manager does.
func NewExternalMetricsClient(c externalmetrics.ExternalMetricsClient) ExternalMetricsClient {
	return apiExternalMetrics{c}
}

type apiExternalMetrics struct {
	c externalmetrics.ExternalMetricsClient
}

func (m apiExternalMetrics) ExternalMetric(_ context.Context, namespace, name string, selector labels.Selector) ([]int64, error) {
	list, err := m.c.NamespacedMetrics(namespace).List(name, selector)
	if err != nil {
		return nil, fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, errors.New("no metrics returned from external metrics API")
	}
	out := make([]int64, 0, len(list.Items))
	for _, v := range list.Items {
		out = append(out, v.Value.MilliValue())
	}
	return out, nil
}

// externalValues is the external metrics API's answer for one metric of an HPA.
type externalValues struct {
	values []int64
	err    error
}

// fetchExternalMetrics reads every External metric hpa names, by its index in
// hpa.Spec.Metrics; without a client each one fails as on a cluster that serves no
// external metrics API.
func fetchExternalMetrics(ctx context.Context, c ExternalMetricsClient, hpa *autoscalingv2.HorizontalPodAutoscaler) map[int]externalValues {
	out := map[int]externalValues{}
	for i, m := range hpa.Spec.Metrics {
		if m.Type != autoscalingv2.ExternalMetricSourceType || m.External == nil {
			continue
		}
		if c == nil {
			out[i] = externalValues{err: errNoExternalMetrics}
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(m.External.Metric.Selector)
		if err != nil {
			out[i] = externalValues{err: err}
			continue
		}
		values, err := c.ExternalMetric(ctx, hpa.Namespace, m.External.Metric.Name, sel)
		out[i] = externalValues{values: values, err: err}
	}
	return out
}
