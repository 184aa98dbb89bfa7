package autoscaling

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upper bounds of the behavior fields.
const (
	maxPeriodSeconds              int32 = 1800
	maxStabilizationWindowSeconds int32 = 3600
)

// refOptions relax the checks of a CrossVersionObjectReference.
type refOptions struct {
	// allowEmptyGroup accepts "v1" (core) as apiVersion.
	allowEmptyGroup bool
	// skipAPIVersion leaves apiVersion unchecked.
	skipAPIVersion bool
}

// ValidateHorizontalPodAutoscaler checks an HPA's spec; old is nil on create. Field paths
// and wording are Kubernetes'. As upstream, an update that keeps the target's apiVersion
// and kind does not re-check that apiVersion, and a ReplicationController target may name
// the core group. minReplicas may be 0 (scale to zero is on by default at the API version
// served) only with an Object or External metric.
func ValidateHorizontalPodAutoscaler(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	spec := &h.Spec
	fldPath := field.NewPath("spec")
	var errs field.ErrorList
	if spec.MinReplicas != nil && *spec.MinReplicas < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("minReplicas"), *spec.MinReplicas, "must be greater than or equal to 0"))
	}
	if spec.MaxReplicas == 0 {
		errs = append(errs, field.Required(fldPath.Child("maxReplicas"), "must be set and greater than 0"))
	} else if spec.MaxReplicas < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to 1"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < *spec.MinReplicas {
		errs = append(errs, field.Invalid(fldPath.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}

	targetOpts := refOptions{}
	switch {
	case old != nil && old.Spec.ScaleTargetRef.APIVersion == spec.ScaleTargetRef.APIVersion && old.Spec.ScaleTargetRef.Kind == spec.ScaleTargetRef.Kind:
		targetOpts.skipAPIVersion = true
	case spec.ScaleTargetRef.Kind == "ReplicationController":
		targetOpts.allowEmptyGroup = true
	}
	errs = append(errs, validateObjectReference(spec.ScaleTargetRef, fldPath.Child("scaleTargetRef"), targetOpts)...)

	objectOpts := refOptions{allowEmptyGroup: true}
	if old != nil {
		for _, m := range old.Spec.Metrics {
			if m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil && apiVersionError(m.Object.DescribedObject.APIVersion, objectOpts) != nil {
				objectOpts.skipAPIVersion = true // an object stored before the check keeps working
				break
			}
		}
	}
	errs = append(errs, validateMetrics(spec.Metrics, fldPath.Child("metrics"), spec.MinReplicas, objectOpts)...)
	if b := spec.Behavior; b != nil {
		errs = append(errs, validateScalingRules(b.ScaleUp, fldPath.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateScalingRules(b.ScaleDown, fldPath.Child("behavior", "scaleDown"))...)
	}
	return errs
}

// ValidateHorizontalPodAutoscalerStatus checks a status write: replica counts and condition
// generations are not negative.
func ValidateHorizontalPodAutoscalerStatus(s *autoscalingv2.HorizontalPodAutoscalerStatus) field.ErrorList {
	var errs field.ErrorList
	for i, c := range s.Conditions {
		if c.ObservedGeneration != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(*c.ObservedGeneration, field.NewPath("status", "conditions").Index(i).Child("observedGeneration"))...)
		}
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.CurrentReplicas), field.NewPath("status", "currentReplicas"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.DesiredReplicas), field.NewPath("status", "desiredReplicas"))...)
	return errs
}

func validateObjectReference(ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path, opts refOptions) field.ErrorList {
	var errs field.ErrorList
	if ref.Kind == "" {
		errs = append(errs, field.Required(fldPath.Child("kind"), ""))
	} else {
		for _, msg := range content.IsPathSegmentName(ref.Kind) {
			errs = append(errs, field.Invalid(fldPath.Child("kind"), ref.Kind, msg))
		}
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else {
		for _, msg := range content.IsPathSegmentName(ref.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), ref.Name, msg))
		}
	}
	if err := apiVersionError(ref.APIVersion, opts); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	return errs
}

func apiVersionError(apiVersion string, opts refOptions) error {
	if opts.skipAPIVersion {
		return nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return err
	}
	if !opts.allowEmptyGroup && gv.Group == "" {
		return fmt.Errorf("apiVersion must specify API group")
	}
	return nil
}

func validateMetrics(metrics []autoscalingv2.MetricSpec, fldPath *field.Path, minReplicas *int32, opts refOptions) field.ErrorList {
	var errs field.ErrorList
	objectOrExternal := false
	for i := range metrics {
		errs = append(errs, validateMetricSpec(&metrics[i], fldPath.Index(i), opts)...)
		if t := metrics[i].Type; t == autoscalingv2.ObjectMetricSourceType || t == autoscalingv2.ExternalMetricSourceType {
			objectOrExternal = true
		}
	}
	if minReplicas != nil && *minReplicas == 0 && !objectOrExternal {
		errs = append(errs, field.Forbidden(fldPath, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

// metricSourceTypes are the metric types in the sorted order Kubernetes lists them.
var metricSourceTypes = []string{
	string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
	string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType),
	string(autoscalingv2.ResourceMetricSourceType),
}

// validateMetricSpec checks that a metric fills exactly the source its type names, and
// that source. Only the first source present (in the order object, external, pods,
// resource, containerResource) is validated, as upstream.
func validateMetricSpec(m *autoscalingv2.MetricSpec, fldPath *field.Path, opts refOptions) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(fldPath.Child("type"), "must specify a metric source type"))
	}
	known := false
	for _, t := range metricSourceTypes {
		known = known || string(m.Type) == t
	}
	if !known {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), m.Type, metricSourceTypes))
	}

	type source struct {
		name     string
		present  bool
		validate func() field.ErrorList
	}
	sources := []source{
		{"object", m.Object != nil, func() field.ErrorList { return validateObjectSource(m.Object, fldPath.Child("object"), opts) }},
		{"external", m.External != nil, func() field.ErrorList { return validateExternalSource(m.External, fldPath.Child("external")) }},
		{"pods", m.Pods != nil, func() field.ErrorList { return validatePodsSource(m.Pods, fldPath.Child("pods")) }},
		{"resource", m.Resource != nil, func() field.ErrorList { return validateResourceSource(m.Resource, fldPath.Child("resource")) }},
		{"containerResource", m.ContainerResource != nil, func() field.ErrorList {
			return validateContainerResourceSource(m.ContainerResource, fldPath.Child("containerResource"))
		}},
	}
	var present []string
	for _, s := range sources {
		if !s.present {
			continue
		}
		present = append(present, s.name)
		if len(present) == 1 {
			errs = append(errs, s.validate()...)
		}
	}

	expected := ""
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected = "object"
	case autoscalingv2.PodsMetricSourceType:
		expected = "pods"
	case autoscalingv2.ResourceMetricSourceType:
		expected = "resource"
	case autoscalingv2.ExternalMetricSourceType:
		expected = "external"
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected = "containerResource"
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), m.Type, metricSourceTypes))
	}
	if expected != "" {
		for _, s := range sources {
			if s.name == expected && !s.present {
				errs = append(errs, field.Required(fldPath.Child(expected), "must populate information for the given metric source"))
			}
		}
	}
	if len(present) != 1 {
		for _, name := range present {
			if name != expected {
				errs = append(errs, field.Forbidden(fldPath.Child(name), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func validateObjectSource(src *autoscalingv2.ObjectMetricSource, fldPath *field.Path, opts refOptions) field.ErrorList {
	errs := validateObjectReference(src.DescribedObject, fldPath.Child("describedObject"), opts)
	errs = append(errs, validateMetricIdentifier(src.Metric, fldPath.Child("metric"))...)
	errs = append(errs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(fldPath.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func validateExternalSource(src *autoscalingv2.ExternalMetricSource, fldPath *field.Path) field.ErrorList {
	errs := validateMetricIdentifier(src.Metric, fldPath.Child("metric"))
	errs = append(errs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(fldPath.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if src.Target.Value != nil && src.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func validatePodsSource(src *autoscalingv2.PodsMetricSource, fldPath *field.Path) field.ErrorList {
	errs := validateMetricIdentifier(src.Metric, fldPath.Child("metric"))
	errs = append(errs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	if src.Target.AverageValue == nil {
		errs = append(errs, field.Required(fldPath.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

func validateResourceSource(src *autoscalingv2.ResourceMetricSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "must specify a resource name"))
	}
	errs = append(errs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	return append(errs, utilizationOrValueErrors(src.Target, fldPath.Child("target"))...)
}

func validateContainerResourceSource(src *autoscalingv2.ContainerResourceMetricSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "must specify a resource name"))
	} else {
		errs = append(errs, validateContainerResourceName(src.Name, fldPath.Child("name"))...)
	}
	if src.Container == "" {
		errs = append(errs, field.Required(fldPath.Child("container"), "must specify a container"))
	} else {
		for _, msg := range validation.IsDNS1123Label(src.Container) {
			errs = append(errs, field.Invalid(fldPath.Child("container"), src.Container, msg))
		}
	}
	errs = append(errs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	return append(errs, utilizationOrValueErrors(src.Target, fldPath.Child("target"))...)
}

// utilizationOrValueErrors: a resource target is a utilization or a raw average, not both.
func utilizationOrValueErrors(t autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(fldPath.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

func validateMetricTarget(t autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(fldPath.Child("type"), "must specify a metric target type"))
	}
	switch t.Type {
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.Invalid(fldPath.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("value"), t.Value, "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("averageValue"), t.AverageValue, "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("averageUtilization"), t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, fldPath *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "must specify a metric name")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(id.Name) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), id.Name, msg))
	}
	return errs
}

var (
	selectPolicies = []string{string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}
	policyTypes    = []string{string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}
)

func validateScalingRules(r *autoscalingv2.HPAScalingRules, fldPath *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), w, "must be greater than or equal to zero"))
		}
		if *w > maxStabilizationWindowSeconds {
			errs = append(errs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), w, fmt.Sprintf("must be less than or equal to %d", maxStabilizationWindowSeconds)))
		}
	}
	if p := r.SelectPolicy; p != nil {
		switch *p {
		case autoscalingv2.DisabledPolicySelect, autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child("selectPolicy"), p, selectPolicies))
		}
	}
	policiesPath := fldPath.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(policiesPath, "must specify at least one Policy"))
	}
	for i, p := range r.Policies {
		idx := policiesPath.Index(i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			errs = append(errs, field.NotSupported(idx.Child("type"), p.Type, policyTypes))
		}
		if p.Value <= 0 {
			errs = append(errs, field.Invalid(idx.Child("value"), p.Value, "must be greater than zero"))
		}
		if p.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(idx.Child("periodSeconds"), p.PeriodSeconds, "must be greater than zero"))
		}
		if p.PeriodSeconds > maxPeriodSeconds {
			errs = append(errs, field.Invalid(idx.Child("periodSeconds"), p.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxPeriodSeconds)))
		}
	}
	if t := r.Tolerance; t != nil && t.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("tolerance"), t.String(), apivalidation.IsNegativeErrorMsg))
	}
	return errs
}

// standardContainerResources are the resources a container may request without a domain;
// standardResources are all the resource names Kubernetes knows without one (quota names
// included), besides hugepages.
var (
	standardContainerResources = map[v1.ResourceName]bool{v1.ResourceCPU: true, v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true}
	standardResources          = map[v1.ResourceName]bool{
		v1.ResourceCPU: true, v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true,
		v1.ResourceRequestsCPU: true, v1.ResourceRequestsMemory: true, v1.ResourceRequestsEphemeralStorage: true,
		v1.ResourceLimitsCPU: true, v1.ResourceLimitsMemory: true, v1.ResourceLimitsEphemeralStorage: true,
		v1.ResourcePods: true, v1.ResourceQuotas: true, v1.ResourceServices: true, v1.ResourceReplicationControllers: true,
		v1.ResourceSecrets: true, v1.ResourceConfigMaps: true, v1.ResourcePersistentVolumeClaims: true,
		v1.ResourceStorage: true, v1.ResourceRequestsStorage: true, v1.ResourceServicesNodePorts: true,
		v1.ResourceServicesLoadBalancers: true,
	}
)

// validateContainerResourceName accepts what a container can request: cpu, memory,
// ephemeral-storage, hugepages-<size>, or a domain-qualified extended resource.
func validateContainerResourceName(name v1.ResourceName, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	s := string(name)
	if !strings.Contains(s, "/") {
		if !standardResources[name] && !strings.HasPrefix(s, v1.ResourceHugePagesPrefix) && !strings.HasPrefix(s, v1.ResourceRequestsHugePagesPrefix) {
			errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource type or fully qualified"))
		}
		if !standardContainerResources[name] && !strings.HasPrefix(s, v1.ResourceHugePagesPrefix) {
			errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
		return errs
	}
	if !strings.Contains(s, v1.ResourceDefaultNamespacePrefix) && len(validation.IsQualifiedName("requests."+s)) > 0 {
		errs = append(errs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return errs
}
