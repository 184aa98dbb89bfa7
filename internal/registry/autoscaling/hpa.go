package autoscaling

import (
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// DefaultCPUUtilization is the target, in percent of the pods' CPU requests, of an HPA
// that names no metric.
const DefaultCPUUtilization int32 = 80

// HorizontalPodAutoscalerResource serves autoscaling/v2 HorizontalPodAutoscalers with their
// status subresource. Generation moves with the spec, which is how the controller tells a
// spec change (sync now) from its own status write (wait for the next period).
func HorizontalPodAutoscalerResource() registry.Resource {
	return registry.Resource{
		GVK:             autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
		Plural:          "horizontalpodautoscalers",
		Singular:        "horizontalpodautoscaler",
		ShortNames:      []string{"hpa"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList:         func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
		}),
		Default: registry.Hook(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			DefaultHorizontalPodAutoscaler(h)
		}),
		Validate: func(obj runtime.Object) field.ErrorList {
			if h := hpaFrom(obj); h != nil {
				return ValidateHorizontalPodAutoscaler(h, nil)
			}
			return nil
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			if h, o := hpaFrom(obj), hpaFrom(old); h != nil && o != nil {
				return ValidateHorizontalPodAutoscaler(h, o)
			}
			return nil
		},
		Status: &registry.StatusStrategy{
			ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList {
				if h := hpaFrom(obj); h != nil {
					return ValidateHorizontalPodAutoscalerStatus(&h.Status)
				}
				return nil
			},
		},
		Columns: Columns(),
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			if h := hpaFrom(obj); h != nil {
				return Row(h, now)
			}
			return nil
		},
	}
}

func hpaFrom(obj runtime.Object) *autoscalingv2.HorizontalPodAutoscaler {
	h, _ := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	return h
}

// DefaultHorizontalPodAutoscaler applies autoscaling/v2's defaults: one minimum replica,
// 80% average CPU utilization when no metric is named, and, when a behavior is given,
// every rule it leaves out (see DefaultScaleUpRules and DefaultScaleDownRules).
func DefaultHorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptrTo[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilizationMetric(DefaultCPUUtilization)}
	}
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = fillRules(b.ScaleUp, DefaultScaleUpRules())
		b.ScaleDown = fillRules(b.ScaleDown, DefaultScaleDownRules())
	}
}

// cpuUtilizationMetric is the metric `kubectl autoscale --cpu-percent` and v1's
// targetCPUUtilizationPercentage mean.
func cpuUtilizationMetric(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   v1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo(percent)},
		},
	}
}

// DefaultScaleUpRules is how fast an HPA grows unless its behavior says otherwise: no
// stabilization, and per 15 s the larger of doubling and adding four pods.
func DefaultScaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptrTo[int32](0),
		SelectPolicy:               ptrTo(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// DefaultScaleDownRules is how fast an HPA shrinks unless its behavior says otherwise:
// down to any size within 15 s. The stabilization window stays unset, as upstream: the
// controller fills it from its downscale-stabilization setting (5 minutes).
func DefaultScaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptrTo(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// fillRules returns the defaults overridden by whatever given sets.
func fillRules(given, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if given == nil {
		return defaults
	}
	if given.SelectPolicy != nil {
		defaults.SelectPolicy = given.SelectPolicy
	}
	if given.StabilizationWindowSeconds != nil {
		defaults.StabilizationWindowSeconds = given.StabilizationWindowSeconds
	}
	if given.Policies != nil {
		defaults.Policies = given.Policies
	}
	if given.Tolerance != nil {
		defaults.Tolerance = given.Tolerance
	}
	return defaults
}

func ptrTo[T any](v T) *T { return &v }
