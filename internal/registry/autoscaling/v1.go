package autoscaling

import (
	"encoding/json"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// The annotations through which autoscaling/v1 carries what only v2 can say.
const (
	MetricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	MetricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	ConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	BehaviorSpecsAnnotation  = "autoscaling.alpha.kubernetes.io/behavior"
	// The tolerance annotations are never written, but a v1 client's copies are dropped.
	toleranceScaleDownAnnotation = "autoscaling.alpha.kubernetes.io/scale-down-tolerance"
	toleranceScaleUpAnnotation   = "autoscaling.alpha.kubernetes.io/scale-up-tolerance"
)

var (
	metaV1 = metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"}
	metaV2 = metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"}
)

// HorizontalPodAutoscalerV1Resource serves autoscaling/v1 HorizontalPodAutoscalers as a
// view of the stored v2 objects. Defaults, validation (with v2's field paths, as Kubernetes
// validates the internal shape) and the table are v2's, applied to the converted object.
func HorizontalPodAutoscalerV1Resource() registry.Resource {
	r := HorizontalPodAutoscalerResource()
	r.GVK = autoscalingv1.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
	r.New = func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} }
	r.NewList = func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} }
	r.PrepareForCreate = func(obj runtime.Object) {
		if h := v1From(obj); h != nil {
			h.Status = autoscalingv1.HorizontalPodAutoscalerStatus{}
			// The conditions and current metrics annotations are status too.
			delete(h.Annotations, MetricStatusesAnnotation)
			delete(h.Annotations, ConditionsAnnotation)
		}
	}
	r.PrepareForUpdate = func(obj, old runtime.Object) {
		// The status annotations are status: a spec write keeps the stored ones.
		if h, o := v1From(obj), v1From(old); h != nil && o != nil {
			for _, key := range []string{MetricStatusesAnnotation, ConditionsAnnotation} {
				v, ok := o.Annotations[key]
				switch {
				case ok:
					if h.Annotations == nil {
						h.Annotations = map[string]string{}
					}
					h.Annotations[key] = v
				default:
					delete(h.Annotations, key)
				}
			}
		}
	}
	r.Default = func(obj runtime.Object) {
		if h := v1From(obj); h != nil && h.Spec.MinReplicas == nil {
			h.Spec.MinReplicas = ptrTo[int32](1)
		}
	}
	r.Validate = func(obj runtime.Object) field.ErrorList {
		if h := v1From(obj); h != nil {
			return ValidateHorizontalPodAutoscaler(storedFromV1(h), nil)
		}
		return nil
	}
	r.ValidateUpdate = func(obj, old runtime.Object) field.ErrorList {
		if h, o := v1From(obj), v1From(old); h != nil && o != nil {
			return ValidateHorizontalPodAutoscaler(storedFromV1(h), storedFromV1(o))
		}
		return nil
	}
	r.Status = &registry.StatusStrategy{
		ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList {
			if h := v1From(obj); h != nil {
				return ValidateHorizontalPodAutoscalerStatus(&FromV1(h).Status)
			}
			return nil
		},
	}
	r.Row = func(obj runtime.Object, now time.Time) []interface{} {
		if h := v1From(obj); h != nil {
			return Row(FromV1(h), now)
		}
		return nil
	}
	r.Storage = &registry.StorageView{
		GVR: autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"),
		ToStorage: func(obj runtime.Object) runtime.Object {
			if h := v1From(obj); h != nil {
				return storedFromV1(h)
			}
			return obj
		},
		FromStorage: func(obj runtime.Object) runtime.Object {
			if h := hpaFrom(obj); h != nil {
				return ToV1(h)
			}
			return obj
		},
	}
	return r
}

func v1From(obj runtime.Object) *autoscalingv1.HorizontalPodAutoscaler {
	h, _ := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	return h
}

// storedFromV1 is what a v1 object is kept as: its v2 form with v2's defaults, which the
// stored object would get anyway when it is next read.
func storedFromV1(in *autoscalingv1.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := FromV1(in)
	DefaultHorizontalPodAutoscaler(out)
	return out
}

// ToV1 converts a v2 HPA to autoscaling/v1 as Kubernetes does: the first CPU utilization
// target becomes targetCPUUtilizationPercentage; every other metric, every current
// metric, the conditions and the behavior go into annotations. A nil HPA converts to nil.
func ToV1(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv1.HorizontalPodAutoscaler {
	if in == nil {
		return nil
	}
	out := &autoscalingv1.HorizontalPodAutoscaler{TypeMeta: metaV1, ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.Annotations = dropRoundTripAnnotations(out.Annotations)
	s := &in.Spec
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(s.ScaleTargetRef),
		MinReplicas:    copyPtr(s.MinReplicas),
		MaxReplicas:    s.MaxReplicas,
	}
	var others []autoscalingv1.MetricSpec
	for _, m := range s.Metrics {
		if isCPUUtilization(m) {
			if out.Spec.TargetCPUUtilizationPercentage == nil {
				out.Spec.TargetCPUUtilizationPercentage = copyPtr(m.Resource.Target.AverageUtilization)
			}
			continue
		}
		others = append(others, metricSpecToV1(m))
	}
	st := &in.Status
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: copyPtr(st.ObservedGeneration),
		LastScaleTime:      st.LastScaleTime.DeepCopy(),
		CurrentReplicas:    st.CurrentReplicas,
		DesiredReplicas:    st.DesiredReplicas,
	}
	current := make([]autoscalingv1.MetricStatus, 0, len(st.CurrentMetrics))
	for _, m := range st.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == v1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = copyPtr(m.Resource.Current.AverageUtilization)
		}
		current = append(current, metricStatusToV1(m))
	}
	conditions := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(st.Conditions))
	for i, c := range st.Conditions {
		conditions[i] = autoscalingv1.HorizontalPodAutoscalerCondition{Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message, ObservedGeneration: copyPtr(c.ObservedGeneration)}
	}
	if len(others) > 0 {
		setJSONAnnotation(&out.ObjectMeta, MetricSpecsAnnotation, others)
	}
	if len(st.CurrentMetrics) > 0 {
		setJSONAnnotation(&out.ObjectMeta, MetricStatusesAnnotation, current)
	}
	if s.Behavior != nil {
		setJSONAnnotation(&out.ObjectMeta, BehaviorSpecsAnnotation, behaviorToAnnotation(s.Behavior))
	}
	if len(st.Conditions) > 0 {
		setJSONAnnotation(&out.ObjectMeta, ConditionsAnnotation, conditions)
	}
	return out
}

// FromV1 converts an autoscaling/v1 HPA to v2, the inverse of ToV1: the annotations are
// read back (unreadable ones are ignored, as upstream) and removed, and an HPA that names
// no metric at all gets the 80% CPU target v1 always implied.
func FromV1(in *autoscalingv1.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	if in == nil {
		return nil
	}
	out := &autoscalingv2.HorizontalPodAutoscaler{TypeMeta: metaV2, ObjectMeta: *in.ObjectMeta.DeepCopy()}
	ann := in.Annotations
	s := &in.Spec
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(s.ScaleTargetRef),
		MinReplicas:    copyPtr(s.MinReplicas),
		MaxReplicas:    s.MaxReplicas,
	}
	var others []autoscalingv1.MetricSpec
	if raw, ok := ann[MetricSpecsAnnotation]; ok && json.Unmarshal([]byte(raw), &others) == nil {
		for _, m := range others {
			out.Spec.Metrics = append(out.Spec.Metrics, metricSpecFromV1(m))
		}
	}
	if s.TargetCPUUtilizationPercentage != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuUtilizationMetric(*s.TargetCPUUtilizationPercentage))
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilizationMetric(DefaultCPUUtilization)}
	}
	if raw, ok := ann[BehaviorSpecsAnnotation]; ok {
		var b autoscalingv2.HorizontalPodAutoscalerBehavior
		if json.Unmarshal([]byte(raw), &b) == nil && (b.ScaleUp != nil || b.ScaleDown != nil) {
			out.Spec.Behavior = &b
		}
	}

	st := &in.Status
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: copyPtr(st.ObservedGeneration),
		LastScaleTime:      st.LastScaleTime.DeepCopy(),
		CurrentReplicas:    st.CurrentReplicas,
		DesiredReplicas:    st.DesiredReplicas,
	}
	var current []autoscalingv1.MetricStatus
	if raw, ok := ann[MetricStatusesAnnotation]; ok && json.Unmarshal([]byte(raw), &current) == nil {
		// These say more than currentCPUUtilizationPercentage.
		out.Status.CurrentMetrics = make([]autoscalingv2.MetricStatus, len(current))
		for i, m := range current {
			out.Status.CurrentMetrics[i] = metricStatusFromV1(m)
		}
	} else if st.CurrentCPUUtilizationPercentage != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(st.CurrentCPUUtilizationPercentage)}},
		}}
	}
	var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
	if raw, ok := ann[ConditionsAnnotation]; ok && json.Unmarshal([]byte(raw), &conditions) == nil {
		out.Status.Conditions = make([]autoscalingv2.HorizontalPodAutoscalerCondition, len(conditions))
		for i, c := range conditions {
			out.Status.Conditions[i] = autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message, ObservedGeneration: c.ObservedGeneration}
		}
	}
	out.Annotations = dropRoundTripAnnotations(out.Annotations)
	return out
}

func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == v1.ResourceCPU && m.Resource.Target.AverageUtilization != nil
}

// dropRoundTripAnnotations returns the annotations without the conversion ones (a copy
// when there were any; nil when nothing else is left of a map that had them).
func dropRoundTripAnnotations(in map[string]string) map[string]string {
	keys := []string{MetricSpecsAnnotation, MetricStatusesAnnotation, ConditionsAnnotation, BehaviorSpecsAnnotation,
		toleranceScaleDownAnnotation, toleranceScaleUpAnnotation}
	found := false
	for _, k := range keys {
		_, ok := in[k]
		found = found || ok
	}
	if !found {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

func setJSONAnnotation(m *metav1.ObjectMeta, key string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return // the values are plain API types; they always encode
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = string(data)
}

func metricSpecToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		o := &autoscalingv1.ObjectMetricSource{
			Target:       autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName:   m.Object.Metric.Name,
			Selector:     m.Object.Metric.Selector.DeepCopy(),
			AverageValue: copyQuantity(m.Object.Target.AverageValue),
		}
		if m.Object.Target.Value != nil {
			o.TargetValue = m.Object.Target.Value.DeepCopy()
		}
		out.Object = o
	case m.Pods != nil:
		p := &autoscalingv1.PodsMetricSource{MetricName: m.Pods.Metric.Name, Selector: m.Pods.Metric.Selector.DeepCopy()}
		if m.Pods.Target.AverageValue != nil {
			p.TargetAverageValue = m.Pods.Target.AverageValue.DeepCopy()
		}
		out.Pods = p
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: m.Resource.Name,
			TargetAverageUtilization: copyPtr(m.Resource.Target.AverageUtilization), TargetAverageValue: copyQuantity(m.Resource.Target.AverageValue)}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			TargetAverageUtilization: copyPtr(m.ContainerResource.Target.AverageUtilization), TargetAverageValue: copyQuantity(m.ContainerResource.Target.AverageValue)}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector.DeepCopy(),
			TargetValue: copyQuantity(m.External.Target.Value), TargetAverageValue: copyQuantity(m.External.Target.AverageValue)}
	}
	return out
}

func metricSpecFromV1(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, AverageValue: copyQuantity(m.Object.AverageValue)}
		if m.Object.AverageValue == nil {
			t.Value = ptrTo(m.Object.TargetValue.DeepCopy())
		} else {
			t.Type = autoscalingv2.AverageValueMetricType
			// v1 always carries a value; a zero one next to an average means none.
			if !m.Object.TargetValue.IsZero() {
				t.Value = ptrTo(m.Object.TargetValue.DeepCopy())
			}
		}
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector.DeepCopy()},
			Target:          t,
		}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector.DeepCopy()},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptrTo(m.Pods.TargetAverageValue.DeepCopy())},
		}
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: m.Resource.Name,
			Target: resourceTargetFromV1(m.Resource.TargetAverageUtilization, m.Resource.TargetAverageValue)}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Target: resourceTargetFromV1(m.ContainerResource.TargetAverageUtilization, m.ContainerResource.TargetAverageValue)}
	case m.External != nil:
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: copyQuantity(m.External.TargetValue),
			AverageValue: copyQuantity(m.External.TargetAverageValue)}
		if m.External.TargetValue == nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector.DeepCopy()},
			Target: t,
		}
	}
	return out
}

func resourceTargetFromV1(utilization *int32, value *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: copyPtr(utilization), AverageValue: copyQuantity(value)}
	if utilization == nil {
		t.Type = autoscalingv2.AverageValueMetricType
	}
	return t
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		o := &autoscalingv1.ObjectMetricStatus{
			Target:       autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName:   m.Object.Metric.Name,
			Selector:     m.Object.Metric.Selector.DeepCopy(),
			AverageValue: copyQuantity(m.Object.Current.AverageValue),
		}
		if m.Object.Current.Value != nil {
			o.CurrentValue = m.Object.Current.Value.DeepCopy()
		}
		out.Object = o
	case m.Pods != nil:
		p := &autoscalingv1.PodsMetricStatus{MetricName: m.Pods.Metric.Name, Selector: m.Pods.Metric.Selector.DeepCopy()}
		if m.Pods.Current.AverageValue != nil {
			p.CurrentAverageValue = m.Pods.Current.AverageValue.DeepCopy()
		}
		out.Pods = p
	case m.Resource != nil:
		r := &autoscalingv1.ResourceMetricStatus{Name: m.Resource.Name, CurrentAverageUtilization: copyPtr(m.Resource.Current.AverageUtilization)}
		if m.Resource.Current.AverageValue != nil {
			r.CurrentAverageValue = m.Resource.Current.AverageValue.DeepCopy()
		}
		out.Resource = r
	case m.ContainerResource != nil:
		c := &autoscalingv1.ContainerResourceMetricStatus{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			CurrentAverageUtilization: copyPtr(m.ContainerResource.Current.AverageUtilization)}
		if m.ContainerResource.Current.AverageValue != nil {
			c.CurrentAverageValue = m.ContainerResource.Current.AverageValue.DeepCopy()
		}
		out.ContainerResource = c
	case m.External != nil:
		e := &autoscalingv1.ExternalMetricStatus{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector.DeepCopy(),
			CurrentAverageValue: copyQuantity(m.External.Current.AverageValue)}
		if m.External.Current.Value != nil {
			e.CurrentValue = m.External.Current.Value.DeepCopy()
		}
		out.External = e
	}
	return out
}

func metricStatusFromV1(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv2.ObjectMetricStatus{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector.DeepCopy()},
			Current:         autoscalingv2.MetricValueStatus{Value: ptrTo(m.Object.CurrentValue.DeepCopy()), AverageValue: copyQuantity(m.Object.AverageValue)},
		}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptrTo(m.Pods.CurrentAverageValue.DeepCopy())},
		}
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: m.Resource.Name,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(m.Resource.CurrentAverageUtilization), AverageValue: ptrTo(m.Resource.CurrentAverageValue.DeepCopy())}}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(m.ContainerResource.CurrentAverageUtilization),
				AverageValue: ptrTo(m.ContainerResource.CurrentAverageValue.DeepCopy())}}
	case m.External != nil:
		out.External = &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{Value: ptrTo(m.External.CurrentValue.DeepCopy()), AverageValue: copyQuantity(m.External.CurrentAverageValue)},
		}
	}
	return out
}

// The behavior annotation holds Kubernetes' internal type, encoded without JSON tags:
// Go field names, and null for what is unset. Reading it back works with v2's tags
// because field names match case-insensitively.
type (
	behaviorAnnotation struct {
		ScaleUp   *rulesAnnotation
		ScaleDown *rulesAnnotation
	}
	rulesAnnotation struct {
		StabilizationWindowSeconds *int32
		SelectPolicy               *autoscalingv2.ScalingPolicySelect
		Policies                   []policyAnnotation
		Tolerance                  *resource.Quantity
	}
	policyAnnotation struct {
		Type          autoscalingv2.HPAScalingPolicyType
		Value         int32
		PeriodSeconds int32
	}
)

func behaviorToAnnotation(b *autoscalingv2.HorizontalPodAutoscalerBehavior) behaviorAnnotation {
	rules := func(r *autoscalingv2.HPAScalingRules) *rulesAnnotation {
		if r == nil {
			return nil
		}
		out := &rulesAnnotation{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy, Tolerance: r.Tolerance}
		for _, p := range r.Policies {
			out.Policies = append(out.Policies, policyAnnotation(p))
		}
		return out
	}
	return behaviorAnnotation{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyQuantity(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}
