package hpa

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

func TestAPIMetricsClient(t *testing.T) {
	client := metricsfake.NewSimpleClientset()
	items := cpuMetrics(100, 200)
	for i := range items {
		items[i].Labels = map[string]string{"app": "web"} // the fake filters by label, as the API does
	}
	client.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		l := a.(clienttesting.ListAction)
		if l.GetNamespace() != "default" || l.GetListRestrictions().Labels.String() != "app=web" {
			return true, nil, errors.New("unexpected list " + l.GetNamespace() + " " + l.GetListRestrictions().Labels.String())
		}
		return true, &metricsv1beta1.PodMetricsList{Items: items}, nil
	})
	got, err := fetchPodMetrics(context.Background(), NewMetricsClient(client), "default", labels.SelectorFromSet(labels.Set{"app": "web"}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(items, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	items = nil
	notServed := true
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if notServed {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{}, "")
		}
		return false, nil, nil
	})
	_, err = fetchPodMetrics(context.Background(), NewMetricsClient(client), "default", labels.Everything())
	if want := "unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"; err == nil || err.Error() != want {
		t.Errorf("API not served: err = %v, want %q", err, want)
	}
	notServed = false
	if _, err := fetchPodMetrics(context.Background(), NewMetricsClient(client), "default", labels.SelectorFromSet(labels.Set{"app": "web"})); err == nil ||
		err.Error() != "no metrics returned from resource metrics API" {
		t.Errorf("empty list: err = %v", err)
	}
}
