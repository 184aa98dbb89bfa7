package autoscaling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// makeHPA is what `kubectl autoscale deployment web --cpu-percent=50 --min=1 --max=5`
// sends, defaulted, after mutate.
func makeHPA(mutate func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptrTo[int32](1),
			MaxReplicas:    5,
			Metrics:        []autoscalingv2.MetricSpec{cpuUtilizationMetric(50)},
		},
	}
	DefaultHorizontalPodAutoscaler(h)
	if mutate != nil {
		mutate(h)
	}
	return h
}

func errStrings(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		in   autoscalingv2.HorizontalPodAutoscalerSpec
		want autoscalingv2.HorizontalPodAutoscalerSpec
	}{
		{
			name: "min replicas and the 80% CPU metric",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, MinReplicas: ptrTo[int32](1), Metrics: []autoscalingv2.MetricSpec{cpuUtilizationMetric(80)}},
		},
		{
			name: "given metrics and min are kept, no behavior stays none",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, MinReplicas: ptrTo[int32](2), Metrics: []autoscalingv2.MetricSpec{cpuUtilizationMetric(50)}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, MinReplicas: ptrTo[int32](2), Metrics: []autoscalingv2.MetricSpec{cpuUtilizationMetric(50)}},
		},
		{
			name: "an empty behavior gets both default rule sets",
			in:   autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, MinReplicas: ptrTo[int32](1), Metrics: []autoscalingv2.MetricSpec{cpuUtilizationMetric(80)},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0), SelectPolicy: ptrTo(autoscalingv2.MaxChangePolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 4, PeriodSeconds: 15}, {Type: "Percent", Value: 100, PeriodSeconds: 15}}},
					ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptrTo(autoscalingv2.MaxChangePolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Percent", Value: 100, PeriodSeconds: 15}}},
				}},
		},
		{
			name: "a partial rule keeps what it sets and gets the rest",
			in: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0), Tolerance: quantity("50m")}}},
			want: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, MinReplicas: ptrTo[int32](1), Metrics: []autoscalingv2.MetricSpec{cpuUtilizationMetric(80)},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: DefaultScaleUpRules(),
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0), SelectPolicy: ptrTo(autoscalingv2.MaxChangePolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Percent", Value: 100, PeriodSeconds: 15}}, Tolerance: quantity("50m")},
				}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &autoscalingv2.HorizontalPodAutoscaler{Spec: tc.in}
			DefaultHorizontalPodAutoscaler(h)
			if diff := cmp.Diff(tc.want, h.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	type hpa = autoscalingv2.HorizontalPodAutoscaler
	tests := []struct {
		name   string
		mutate func(*hpa)
		want   []string
	}{
		{name: "kubectl autoscale", want: []string{}},
		{name: "target kind and name required", mutate: func(h *hpa) { h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1"} },
			want: []string{"spec.scaleTargetRef.kind: Required value", "spec.scaleTargetRef.name: Required value"}},
		{name: "target names are path segments", mutate: func(h *hpa) { h.Spec.ScaleTargetRef.Name = "a/b"; h.Spec.ScaleTargetRef.Kind = ".." },
			want: []string{`spec.scaleTargetRef.kind: Invalid value: "..": may not be '..'`, `spec.scaleTargetRef.name: Invalid value: "a/b": may not contain '/'`}},
		{name: "target apiVersion needs a group", mutate: func(h *hpa) { h.Spec.ScaleTargetRef.APIVersion = "v1" },
			want: []string{`spec.scaleTargetRef.apiVersion: Invalid value: "v1": apiVersion must specify API group`}},
		{name: "a ReplicationController target is in the core group", mutate: func(h *hpa) {
			h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "ReplicationController", Name: "rc"}
		}, want: []string{}},
		{name: "target apiVersion must parse", mutate: func(h *hpa) { h.Spec.ScaleTargetRef.APIVersion = "a/b/c" },
			want: []string{`spec.scaleTargetRef.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`}},
		{name: "minReplicas not negative", mutate: func(h *hpa) { h.Spec.MinReplicas = ptrTo[int32](-1) },
			want: []string{"spec.minReplicas: Invalid value: -1: must be greater than or equal to 0"}},
		{name: "minReplicas 0 needs an object or external metric", mutate: func(h *hpa) { h.Spec.MinReplicas = ptrTo[int32](0) },
			want: []string{"spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas"}},
		{name: "minReplicas 0 with an external metric", mutate: func(h *hpa) {
			h.Spec.MinReplicas = ptrTo[int32](0)
			h.Spec.Metrics = append(h.Spec.Metrics, autoscalingv2.MetricSpec{Type: "External", External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: "Value", Value: quantity("10")}}})
		}, want: []string{}},
		{name: "maxReplicas required", mutate: func(h *hpa) { h.Spec.MaxReplicas = 0 },
			want: []string{"spec.maxReplicas: Required value: must be set and greater than 0", "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"}},
		{name: "maxReplicas below minReplicas", mutate: func(h *hpa) { h.Spec.MinReplicas = ptrTo[int32](6) },
			want: []string{"spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`"}},
		{name: "maxReplicas negative", mutate: func(h *hpa) { h.Spec.MinReplicas = nil; h.Spec.MaxReplicas = -2 },
			want: []string{"spec.maxReplicas: Invalid value: -2: must be greater than or equal to 1"}},
		{name: "utilization at least 1", mutate: func(h *hpa) { h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptrTo[int32](0) },
			want: []string{"spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"}},
		{name: "resource target needs utilization or value", mutate: func(h *hpa) {
			h.Spec.Metrics[0].Resource.Target = autoscalingv2.MetricTarget{Type: "Utilization"}
		}, want: []string{"spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization"}},
		{name: "resource target not both", mutate: func(h *hpa) { h.Spec.Metrics[0].Resource.Target.AverageValue = quantity("100m") },
			want: []string{"spec.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization"}},
		{name: "resource name and target type required", mutate: func(h *hpa) {
			h.Spec.Metrics[0].Resource.Name = ""
			h.Spec.Metrics[0].Resource.Target.Type = ""
		}, want: []string{"spec.metrics[0].resource.name: Required value: must specify a resource name",
			"spec.metrics[0].resource.target.type: Required value: must specify a metric target type",
			`spec.metrics[0].resource.target.type: Invalid value: "": must be either Utilization, Value, or AverageValue`}},
		{name: "metric type required", mutate: func(h *hpa) { h.Spec.Metrics[0].Type = "" },
			want: []string{"spec.metrics[0].type: Required value: must specify a metric source type",
				`spec.metrics[0].type: Unsupported value: "": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`,
				`spec.metrics[0].type: Unsupported value: "": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`}},
		{name: "type names a missing source, another one is given", mutate: func(h *hpa) { h.Spec.Metrics[0].Type = "Pods" },
			want: []string{"spec.metrics[0].pods: Required value: must populate information for the given metric source"}},
		{name: "two sources", mutate: func(h *hpa) {
			h.Spec.Metrics[0].Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
				Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("1")}}
		}, want: []string{"spec.metrics[0].pods: Forbidden: must populate the given metric source only"}},
		{name: "pods metric needs a name and an average", mutate: func(h *hpa) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Target: autoscalingv2.MetricTarget{Type: "AverageValue"}}}}
		}, want: []string{"spec.metrics[0].pods.metric.name: Required value: must specify a metric name",
			"spec.metrics[0].pods.target.averageValue: Required value: must specify a positive target averageValue"}},
		{name: "object metric", mutate: func(h *hpa) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: "Object", Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: "Value", Value: quantity("-1")}}}}
		}, want: []string{"spec.metrics[0].object.describedObject.name: Required value", `spec.metrics[0].object.target.value: Invalid value: "-1": must be positive`}},
		{name: "external metric not both targets", mutate: func(h *hpa) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: "External", External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: "Value", Value: quantity("1"), AverageValue: quantity("1")}}}}
		}, want: []string{"spec.metrics[0].external.target.value: Forbidden: may not set both a target value for metric and a per-pod target"}},
		{name: "container resource", mutate: func(h *hpa) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: "ContainerResource", ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
				Name: "gpu", Container: "Web_1", Target: autoscalingv2.MetricTarget{Type: "Utilization", AverageUtilization: ptrTo[int32](50)}}}}
		}, want: []string{`spec.metrics[0].containerResource.name: Invalid value: "gpu": must be a standard resource type or fully qualified`,
			`spec.metrics[0].containerResource.name: Invalid value: "gpu": must be a standard resource for containers`,
			`spec.metrics[0].containerResource.container: Invalid value: "Web_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{name: "behavior policies", mutate: func(h *hpa) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](3601), SelectPolicy: ptrTo[autoscalingv2.ScalingPolicySelect]("Most"),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Nodes", Value: 0, PeriodSeconds: 1801}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](-1), Tolerance: quantity("-1m")},
			}
		}, want: []string{
			"spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600",
			`spec.behavior.scaleUp.selectPolicy: Unsupported value: "Most": supported values: "Disabled", "Max", "Min"`,
			`spec.behavior.scaleUp.policies[0].type: Unsupported value: "Nodes": supported values: "Percent", "Pods"`,
			"spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
			"spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
			"spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero",
			"spec.behavior.scaleDown.policies: Required value: must specify at least one Policy",
			`spec.behavior.scaleDown.tolerance: Invalid value: "-1m": must be greater than or equal to 0`,
		}},
	}
	r := HorizontalPodAutoscalerResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(makeHPA(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	r := HorizontalPodAutoscalerResource()
	// An object stored with a group-less target keeps updating while the target stays.
	old := makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.APIVersion = "v1" })
	changed := old.DeepCopy()
	changed.Spec.MaxReplicas = 7
	if diff := cmp.Diff([]string{}, errStrings(r.ValidateUpdate(changed, old))); diff != "" {
		t.Errorf("same target (-want +got):\n%s", diff)
	}
	changed.Spec.ScaleTargetRef.Kind = "StatefulSet"
	want := []string{`spec.scaleTargetRef.apiVersion: Invalid value: "v1": apiVersion must specify API group`}
	if diff := cmp.Diff(want, errStrings(r.ValidateUpdate(changed, old))); diff != "" {
		t.Errorf("new target (-want +got):\n%s", diff)
	}
	status := makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Status.CurrentReplicas = -1
		h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: "AbleToScale", ObservedGeneration: ptrTo[int64](-2)}}
	})
	want = []string{"status.conditions[0].observedGeneration: Invalid value: -2: must be greater than or equal to 0",
		"status.currentReplicas: Invalid value: -1: must be greater than or equal to 0"}
	if diff := cmp.Diff(want, errStrings(r.Status.ValidateUpdate(status, makeHPA(nil)))); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestRow(t *testing.T) {
	util := func(p int32) *autoscalingv2.MetricStatus {
		return &autoscalingv2.MetricStatus{Type: "Resource", Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceCPU,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: &p, AverageValue: quantity("45m")}}}
	}
	podsMetric := autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
		Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("10")}}}
	memValue := autoscalingv2.MetricSpec{Type: "Resource", Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceMemory,
		Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("100Mi")}}}
	external := autoscalingv2.MetricSpec{Type: "External", External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "q"},
		Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: quantity("30")}}}
	tests := []struct {
		name   string
		mutate func(*autoscalingv2.HorizontalPodAutoscaler)
		want   []interface{}
	}{
		{name: "no metrics reported yet", want: []interface{}{"web", "Deployment/web", "cpu: <unknown>/50%", "1", int64(5), int64(0), "90s"}},
		{name: "cpu reported", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{*util(45)}
			h.Status.CurrentReplicas = 2
		}, want: []interface{}{"web", "Deployment/web", "cpu: 45%/50%", "1", int64(5), int64(2), "90s"}},
		{name: "unset min, no metrics", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = nil; h.Spec.Metrics = nil },
			want: []interface{}{"web", "Deployment/web", "<none>", "<unset>", int64(5), int64(0), "90s"}},
		{name: "more than two metrics", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = append(h.Spec.Metrics, memValue, podsMetric, external)
			h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{*util(120), {Type: "Resource", Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceMemory,
				Current: autoscalingv2.MetricValueStatus{AverageValue: quantity("50Mi")}}}}
		}, want: []interface{}{"web", "Deployment/web", "cpu: 120%/50%, memory: 50Mi/100Mi + 2 more...", "1", int64(5), int64(0), "90s"}},
		{name: "pods and external", mutate: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{podsMetric, external}
		}, want: []interface{}{"web", "Deployment/web", "<unknown>/10, <unknown>/30 (avg)", "1", int64(5), int64(0), "90s"}},
	}
	r := HorizontalPodAutoscalerResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Row(makeHPA(tc.mutate), now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Columns) {
				t.Errorf("%d cells for %d columns", len(got), len(r.Columns))
			}
		})
	}
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}

func TestHooksTolerateNilAndForeignObjects(t *testing.T) {
	var nilV2 *autoscalingv2.HorizontalPodAutoscaler
	var nilV1 *autoscalingv1.HorizontalPodAutoscaler
	for _, r := range []registry.Resource{HorizontalPodAutoscalerResource(), HorizontalPodAutoscalerV1Resource()} {
		for _, obj := range []runtime.Object{nilV2, nilV1, &v1.Pod{}} {
			r.PrepareForCreate(obj)
			r.Default(obj)
			r.Validate(obj)
			r.ValidateUpdate(obj, obj)
			r.Status.ValidateUpdate(obj, obj)
			r.Row(obj, now)
			if r.Storage != nil {
				r.Storage.ToStorage(obj)
				r.Storage.FromStorage(obj)
			}
		}
	}
}
