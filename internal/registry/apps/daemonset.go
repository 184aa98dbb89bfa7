package apps

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

// TemplateGenerationAnnotation carries a DaemonSet's template generation in apps/v1: 1 on
// create, incremented by the server whenever spec.template changes.
const TemplateGenerationAnnotation = "deprecated.daemonset.template.generation"

// DaemonSetResource serves apps/v1 daemonsets with their status subresource.
func DaemonSetResource() registry.Resource {
	return registry.Resource{
		GVK:             appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Plural:          "daemonsets",
		Singular:        "daemonset",
		ShortNames:      []string{"ds"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:         func() runtime.Object { return &appsv1.DaemonSetList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(ds *appsv1.DaemonSet) {
			ds.Status = appsv1.DaemonSetStatus{}
			setTemplateGeneration(ds, 1)
		}),
		PrepareForUpdate: registry.HookUpdate(func(ds, o *appsv1.DaemonSet) {
			// The template generation is the server's: it follows template changes only.
			gen := templateGeneration(o)
			if !apiequality.Semantic.DeepEqual(ds.Spec.Template, o.Spec.Template) {
				gen++
			}
			setTemplateGeneration(ds, gen)
		}),
		Default: registry.Hook(func(ds *appsv1.DaemonSet) {
			DefaultDaemonSet(ds)
		}),
		Validate: registry.Func(func(ds *appsv1.DaemonSet) field.ErrorList {
			return validateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))
		}),
		ValidateUpdate: registry.FuncUpdate(func(ds, o *appsv1.DaemonSet) field.ErrorList {
			errs := validateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))
			return append(errs, apimachineryvalidation.ValidateImmutableField(ds.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(ds, o *appsv1.DaemonSet) field.ErrorList {
				errs := validateDaemonSetStatus(&ds.Status, field.NewPath("status"))
				return append(errs, collisionCountErrors(ds.Status.CollisionCount, o.Status.CollisionCount)...)
			}),
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			intColumn("Desired", daemonSetStatusDoc["desiredNumberScheduled"]),
			intColumn("Current", daemonSetStatusDoc["currentNumberScheduled"]),
			intColumn("Ready", daemonSetStatusDoc["numberReady"]),
			intColumn("Up-to-date", daemonSetStatusDoc["updatedNumberScheduled"]),
			intColumn("Available", daemonSetStatusDoc["numberAvailable"]),
			stringColumn("Node Selector", v1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			selectorColumn(daemonSetSpecDoc["selector"]),
		},
		Row: registry.FuncWith(func(ds *appsv1.DaemonSet, now time.Time) []interface{} {
			names, images := containerCells(ds.Spec.Template.Spec.Containers)
			return []interface{}{
				ds.Name,
				int64(ds.Status.DesiredNumberScheduled),
				int64(ds.Status.CurrentNumberScheduled),
				int64(ds.Status.NumberReady),
				int64(ds.Status.UpdatedNumberScheduled),
				int64(ds.Status.NumberAvailable),
				labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
				ageCell(ds.ObjectMeta, now),
				names, images, metav1.FormatLabelSelector(ds.Spec.Selector),
			}
		}),
	}
}

// DefaultDaemonSet applies apps/v1's DaemonSet defaults: a RollingUpdate strategy with
// maxUnavailable 1 and maxSurge 0, ten kept revisions, and the pod template's defaults.
func DefaultDaemonSet(ds *appsv1.DaemonSet) {
	u := &ds.Spec.UpdateStrategy
	if u.Type == "" {
		u.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if u.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if u.RollingUpdate == nil {
			u.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if u.RollingUpdate.MaxUnavailable == nil {
			u.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromInt32(1))
		}
		if u.RollingUpdate.MaxSurge == nil {
			u.RollingUpdate.MaxSurge = ptrTo(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptrTo[int32](10)
	}
	core.DefaultPodSpec(&ds.Spec.Template.Spec)
}

// templateGeneration reads the annotation; a missing or malformed value counts as 0, as
// Kubernetes' conversion does.
func templateGeneration(ds *appsv1.DaemonSet) int64 {
	n, err := strconv.ParseInt(ds.Annotations[TemplateGenerationAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func setTemplateGeneration(ds *appsv1.DaemonSet, gen int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[TemplateGenerationAnnotation] = strconv.FormatInt(gen, 10)
}

func validateDaemonSetSpec(s *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	errs := strictSelectorErrors(s.Selector, fldPath.Child("selector"))
	selector, err := metav1.LabelSelectorAsSelector(s.Selector)
	if err == nil && !selector.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	if s.Selector != nil && len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(fldPath.Child("selector"), s.Selector, "empty selector is invalid for daemonset"))
	}
	tmplPath := fldPath.Child("template")
	errs = append(errs, core.ValidatePodTemplateSpec(&s.Template, tmplPath)...)
	errs = append(errs, alwaysRestartErrors(&s.Template, tmplPath, "DaemonSet")...)
	errs = append(errs, nonNegative(s.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateDaemonSetUpdateStrategy(&s.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	errs = append(errs, nonNegativePtr(s.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	return errs
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdateDaemonSet(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(fldPath, s, []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
	}
}

func validateRollingUpdateDaemonSet(ru *appsv1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	maxUnavailable := derefIntOrString(ru.MaxUnavailable)
	maxSurge := derefIntOrString(ru.MaxSurge)
	errs := positiveIntOrPercent(maxUnavailable, fldPath.Child("maxUnavailable"))
	errs = append(errs, positiveIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)
	errs = append(errs, notMoreThan100Percent(maxUnavailable, fldPath.Child("maxUnavailable"))...)
	errs = append(errs, notMoreThan100Percent(maxSurge, fldPath.Child("maxSurge"))...)
	hasUnavailable := intOrPercentValue(maxUnavailable) != 0
	hasSurge := intOrPercentValue(maxSurge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(fldPath.Child("maxSurge"), maxSurge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(fldPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

func validateDaemonSetStatus(s *appsv1.DaemonSetStatus, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(s.CurrentNumberScheduled, fldPath.Child("currentNumberScheduled"))
	errs = append(errs, nonNegative(s.NumberMisscheduled, fldPath.Child("numberMisscheduled"))...)
	errs = append(errs, nonNegative(s.DesiredNumberScheduled, fldPath.Child("desiredNumberScheduled"))...)
	errs = append(errs, nonNegative(s.NumberReady, fldPath.Child("numberReady"))...)
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fldPath.Child("observedGeneration"))...)
	errs = append(errs, nonNegative(s.UpdatedNumberScheduled, fldPath.Child("updatedNumberScheduled"))...)
	errs = append(errs, nonNegative(s.NumberAvailable, fldPath.Child("numberAvailable"))...)
	errs = append(errs, nonNegative(s.NumberUnavailable, fldPath.Child("numberUnavailable"))...)
	errs = append(errs, nonNegativePtr(s.CollisionCount, fldPath.Child("collisionCount"))...)
	return errs
}
