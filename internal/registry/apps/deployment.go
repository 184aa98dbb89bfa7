package apps

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

// DeploymentResource serves apps/v1 deployments with their status and scale subresources.
func DeploymentResource() registry.Resource {
	return registry.Resource{
		GVK:             appsv1.SchemeGroupVersion.WithKind("Deployment"),
		Plural:          "deployments",
		Singular:        "deployment",
		ShortNames:      []string{"deploy"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &appsv1.Deployment{} },
		NewList:         func() runtime.Object { return &appsv1.DeploymentList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(d *appsv1.Deployment) {
			d.Status = appsv1.DeploymentStatus{}
		}),
		Default: registry.Hook(func(d *appsv1.Deployment) {
			DefaultDeployment(d)
		}),
		Validate: registry.Func(func(d *appsv1.Deployment) field.ErrorList {
			return validateDeploymentSpec(&d.Spec, field.NewPath("spec"))
		}),
		ValidateUpdate: registry.FuncUpdate(func(d, o *appsv1.Deployment) field.ErrorList {
			errs := validateDeploymentSpec(&d.Spec, field.NewPath("spec"))
			return append(errs, apimachineryvalidation.ValidateImmutableField(d.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(d, o *appsv1.Deployment) field.ErrorList {
				errs := validateDeploymentStatus(&d.Status, field.NewPath("status"))
				return append(errs, collisionCountErrors(d.Status.CollisionCount, o.Status.CollisionCount)...)
			}),
		},
		Scale: registry.Scale(func(d *appsv1.Deployment) (int32, int32, string) {
			return deref32(d.Spec.Replicas), d.Status.Replicas, scaleSelector(d.Spec.Selector)
		}, func(d *appsv1.Deployment, replicas int32) { d.Spec.Replicas = &replicas }),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			stringColumn("Ready", "Number of the pod with ready state"),
			stringColumn("Up-to-date", deploymentStatusDoc["updatedReplicas"]),
			stringColumn("Available", deploymentStatusDoc["availableReplicas"]),
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			selectorColumn(deploymentSpecDoc["selector"]),
		},
		Row: registry.FuncWith(func(d *appsv1.Deployment, now time.Time) []interface{} {
			names, images := containerCells(d.Spec.Template.Spec.Containers)
			return []interface{}{
				d.Name,
				fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, deref32(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas),
				int64(d.Status.AvailableReplicas),
				ageCell(d.ObjectMeta, now),
				names, images, selectorString(d.Spec.Selector),
			}
		}),
	}
}

// DefaultDeployment applies apps/v1's Deployment defaults: one replica, a RollingUpdate
// strategy with 25% maxUnavailable and maxSurge, ten kept revisions, a 600s progress
// deadline, and the pod template's defaults.
func DefaultDeployment(d *appsv1.Deployment) {
	s := &d.Spec
	if s.Replicas == nil {
		s.Replicas = ptrTo[int32](1)
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.Strategy.RollingUpdate.MaxUnavailable == nil {
			s.Strategy.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromString("25%"))
		}
		if s.Strategy.RollingUpdate.MaxSurge == nil {
			s.Strategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromString("25%"))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptrTo[int32](10)
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = ptrTo[int32](600)
	}
	core.DefaultPodSpec(&s.Template.Spec)
}

func validateDeploymentSpec(s *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(deref32(s.Replicas), fldPath.Child("replicas"))
	ok, selErrs := templateSelectorErrors(s.Selector, &s.Template, fldPath, "empty selector is invalid for deployment", "invalid label selector")
	errs = append(errs, selErrs...)
	if ok {
		errs = append(errs, replicaSetTemplateErrors(&s.Template, fldPath.Child("template"))...)
	}
	errs = append(errs, validateDeploymentStrategy(&s.Strategy, fldPath.Child("strategy"))...)
	errs = append(errs, nonNegative(s.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	errs = append(errs, nonNegativePtr(s.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	if s.ProgressDeadlineSeconds != nil {
		p := fldPath.Child("progressDeadlineSeconds")
		errs = append(errs, nonNegative(*s.ProgressDeadlineSeconds, p)...)
		if *s.ProgressDeadlineSeconds <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(p, s.ProgressDeadlineSeconds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return append(errs, field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil"))
		}
		ruPath := fldPath.Child("rollingUpdate")
		maxUnavailable := derefIntOrString(s.RollingUpdate.MaxUnavailable)
		maxSurge := derefIntOrString(s.RollingUpdate.MaxSurge)
		errs = append(errs, positiveIntOrPercent(maxUnavailable, ruPath.Child("maxUnavailable"))...)
		errs = append(errs, positiveIntOrPercent(maxSurge, ruPath.Child("maxSurge"))...)
		if intOrPercentValue(maxUnavailable) == 0 && intOrPercentValue(maxSurge) == 0 {
			errs = append(errs, field.Invalid(ruPath.Child("maxUnavailable"), maxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
		errs = append(errs, notMoreThan100Percent(maxUnavailable, ruPath.Child("maxUnavailable"))...)
	default:
		errs = append(errs, field.NotSupported(fldPath, s, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

func validateDeploymentStatus(s *appsv1.DeploymentStatus, fldPath *field.Path) field.ErrorList {
	errs := apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fldPath.Child("observedGeneration"))
	errs = append(errs, nonNegative(s.Replicas, fldPath.Child("replicas"))...)
	errs = append(errs, nonNegative(s.UpdatedReplicas, fldPath.Child("updatedReplicas"))...)
	errs = append(errs, nonNegative(s.ReadyReplicas, fldPath.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(s.AvailableReplicas, fldPath.Child("availableReplicas"))...)
	errs = append(errs, nonNegative(s.UnavailableReplicas, fldPath.Child("unavailableReplicas"))...)
	errs = append(errs, nonNegativePtr(s.CollisionCount, fldPath.Child("collisionCount"))...)
	const msg = "cannot be greater than status.replicas"
	errs = append(errs, statusNotAbove(s.UpdatedReplicas, s.Replicas, fldPath.Child("updatedReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.ReadyReplicas, s.Replicas, fldPath.Child("readyReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.AvailableReplicas, s.Replicas, fldPath.Child("availableReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.AvailableReplicas, s.ReadyReplicas, fldPath.Child("availableReplicas"), "cannot be greater than readyReplicas")...)
	return errs
}

// scaleSelector is the selector string the scale subresource reports; a selector that does
// not parse reports nothing rather than failing the read.
func scaleSelector(s *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return ""
	}
	return sel.String()
}

func ptrTo[T any](v T) *T { return &v }
