package autoscaling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fullHPA has a metric of every kind, a behavior, and a status the controller wrote.
func fullHPA() *autoscalingv2.HorizontalPodAutoscaler {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"q": "jobs"}}
	return makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Annotations = map[string]string{"team": "web"}
		h.Generation = 3
		h.Spec.Metrics = append(h.Spec.Metrics,
			autoscalingv2.MetricSpec{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("100Mi")}}},
			autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "rps", Selector: sel},
				Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("10")}}},
			autoscalingv2.MetricSpec{Type: "Object", Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: "Value", Value: quantity("2k")}}},
			autoscalingv2.MetricSpec{Type: "External", External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: sel},
				Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("30")}}},
			autoscalingv2.MetricSpec{Type: "ContainerResource", ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: v1.ResourceCPU, Container: "web",
				Target: autoscalingv2.MetricTarget{Type: "Utilization", AverageUtilization: ptrTo[int32](70)}}},
		)
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0)}}
		DefaultHorizontalPodAutoscaler(h)
		last := metav1.NewTime(now.Add(-30 * time.Second))
		h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: ptrTo[int64](3), LastScaleTime: &last, CurrentReplicas: 2, DesiredReplicas: 3,
			CurrentMetrics: []autoscalingv2.MetricStatus{
				{Type: "Resource", Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceCPU,
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptrTo[int32](75), AverageValue: quantity("75m")}}},
				{Type: "Pods", Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "rps", Selector: sel},
					Current: autoscalingv2.MetricValueStatus{AverageValue: quantity("12")}}},
			},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
				{Type: "AbleToScale", Status: "True", LastTransitionTime: last, Reason: "SucceededRescale", Message: "the HPA controller was able to update the target scale to 3"},
			},
		}
	})
}

func TestToV1(t *testing.T) {
	out := ToV1(fullHPA())
	if out.Spec.TargetCPUUtilizationPercentage == nil || *out.Spec.TargetCPUUtilizationPercentage != 50 {
		t.Errorf("targetCPUUtilizationPercentage = %v, want 50", out.Spec.TargetCPUUtilizationPercentage)
	}
	if out.Status.CurrentCPUUtilizationPercentage == nil || *out.Status.CurrentCPUUtilizationPercentage != 75 {
		t.Errorf("currentCPUUtilizationPercentage = %v, want 75", out.Status.CurrentCPUUtilizationPercentage)
	}
	wantBehavior := `{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},` +
		`{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},` +
		`"ScaleDown":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}`
	if got := out.Annotations[BehaviorSpecsAnnotation]; got != wantBehavior {
		t.Errorf("behavior annotation:\n got %s\nwant %s", got, wantBehavior)
	}
	wantConditions := `[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-03-01T11:59:30Z","reason":"SucceededRescale",` +
		`"message":"the HPA controller was able to update the target scale to 3"}]`
	if got := out.Annotations[ConditionsAnnotation]; got != wantConditions {
		t.Errorf("conditions annotation:\n got %s\nwant %s", got, wantConditions)
	}
	wantMetrics := `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}},` +
		`{"type":"Pods","pods":{"metricName":"rps","targetAverageValue":"10","selector":{"matchLabels":{"q":"jobs"}}}},` +
		`{"type":"Object","object":{"target":{"kind":"Ingress","name":"main","apiVersion":"networking.k8s.io/v1"},"metricName":"hits","targetValue":"2k"}},` +
		`{"type":"External","external":{"metricName":"queue","metricSelector":{"matchLabels":{"q":"jobs"}},"targetAverageValue":"30"}},` +
		`{"type":"ContainerResource","containerResource":{"name":"cpu","targetAverageUtilization":70,"container":"web"}}]`
	if got := out.Annotations[MetricSpecsAnnotation]; got != wantMetrics {
		t.Errorf("metrics annotation:\n got %s\nwant %s", got, wantMetrics)
	}
	if out.Annotations["team"] != "web" || out.Annotations[MetricStatusesAnnotation] == "" {
		t.Errorf("annotations = %v", out.Annotations)
	}
}

func TestV1RoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   *autoscalingv2.HorizontalPodAutoscaler
	}{
		{name: "kubectl autoscale", in: makeHPA(nil)},
		{name: "every metric, behavior and status", in: fullHPA()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.in.DeepCopy()
			back := FromV1(ToV1(tc.in))
			// v1 lists the CPU utilization metric last.
			want := orig.DeepCopy()
			want.TypeMeta = metaV2
			want.Spec.Metrics = append(want.Spec.Metrics[1:], want.Spec.Metrics[0])
			if diff := cmp.Diff(want, back); diff != "" {
				t.Errorf("v2 -> v1 -> v2 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, tc.in); diff != "" {
				t.Errorf("conversion changed its input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromV1(t *testing.T) {
	plain := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{MetricSpecsAnnotation: "not json"}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MaxReplicas: 4},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{CurrentCPUUtilizationPercentage: ptrTo[int32](12)},
	}
	got := FromV1(plain)
	want := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metaV2,
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilizationMetric(80)}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentMetrics: []autoscalingv2.MetricStatus{{Type: "Resource",
			Resource: &autoscalingv2.ResourceMetricStatus{Name: "cpu", Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptrTo[int32](12)}}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("an unreadable annotation is dropped, the 80%% default applies (-want +got):\n%s", diff)
	}

	r := HorizontalPodAutoscalerV1Resource()
	bad := plain.DeepCopy()
	bad.Spec.MaxReplicas = 0
	r.Default(bad)
	wantErrs := []string{"spec.maxReplicas: Required value: must be set and greater than 0", "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"}
	if diff := cmp.Diff(wantErrs, errStrings(r.Validate(bad))); diff != "" {
		t.Errorf("v1 errors use v2 paths (-want +got):\n%s", diff)
	}
	stored, ok := r.Storage.ToStorage(bad).(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok || *stored.Spec.MinReplicas != 1 || r.Storage.GVR.Version != "v2" {
		t.Errorf("stored %#v as %v", stored, r.Storage.GVR)
	}
	// v1 lists the CPU target last, and the printer pairs the i-th status with the i-th
	// metric, as Kubernetes' does: the memory cell shows the CPU status's raw value.
	if got := r.Row(ToV1(fullHPA()), now)[2]; got != "memory: 75m/100Mi, 12/10 + 4 more..." {
		t.Errorf("v1 targets cell = %q", got)
	}
}

func TestV1SpecWriteKeepsStatusAnnotations(t *testing.T) {
	r := HorizontalPodAutoscalerV1Resource()
	old := ToV1(fullHPA())
	stale := old.DeepCopy()
	stale.Annotations[ConditionsAnnotation] = "[]"
	delete(stale.Annotations, MetricStatusesAnnotation)
	stale.Spec.MaxReplicas = 9
	r.PrepareForUpdate(stale, old)
	if diff := cmp.Diff(old.Annotations, stale.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	fresh := ToV1(makeHPA(nil))
	fresh.Annotations = map[string]string{ConditionsAnnotation: "[]"}
	r.PrepareForUpdate(fresh, ToV1(makeHPA(nil)))
	if len(fresh.Annotations) != 0 {
		t.Errorf("a client's status annotations survived: %v", fresh.Annotations)
	}
	r.PrepareForUpdate(nil, nil)
}
