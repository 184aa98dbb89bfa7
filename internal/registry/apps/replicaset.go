package apps

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

// ReplicaSetResource serves apps/v1 replicasets with their status and scale subresources;
// status.replicas is selectable in field selectors.
func ReplicaSetResource() registry.Resource {
	return registry.Resource{
		GVK:             appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		Plural:          "replicasets",
		Singular:        "replicaset",
		ShortNames:      []string{"rs"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList:         func() runtime.Object { return &appsv1.ReplicaSetList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(rs *appsv1.ReplicaSet) {
			rs.Status = appsv1.ReplicaSetStatus{}
		}),
		Default: registry.Hook(func(rs *appsv1.ReplicaSet) {
			DefaultReplicaSet(rs)
		}),
		Validate: registry.Func(func(rs *appsv1.ReplicaSet) field.ErrorList {
			return validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))
		}),
		ValidateUpdate: registry.FuncUpdate(func(rs, o *appsv1.ReplicaSet) field.ErrorList {
			errs := validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))
			return append(errs, apimachineryvalidation.ValidateImmutableField(rs.Spec.Selector, o.Spec.Selector, field.NewPath("spec", "selector"))...)
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(rs, _ *appsv1.ReplicaSet) field.ErrorList {
				return validateReplicaSetStatus(&rs.Status, field.NewPath("status"))
			}),
		},
		Scale: registry.Scale(func(rs *appsv1.ReplicaSet) (int32, int32, string) {
			return deref32(rs.Spec.Replicas), rs.Status.Replicas, scaleSelector(rs.Spec.Selector)
		}, func(rs *appsv1.ReplicaSet, replicas int32) { rs.Spec.Replicas = &replicas }),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			intColumn("Desired", replicaSetSpecDoc["replicas"]),
			intColumn("Current", replicaSetStatusDoc["replicas"]),
			intColumn("Ready", replicaSetStatusDoc["readyReplicas"]),
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
			selectorColumn(replicaSetSpecDoc["selector"]),
		},
		Row: registry.FuncWith(func(rs *appsv1.ReplicaSet, now time.Time) []interface{} {
			names, images := containerCells(rs.Spec.Template.Spec.Containers)
			return []interface{}{
				rs.Name,
				int64(deref32(rs.Spec.Replicas)),
				int64(rs.Status.Replicas),
				int64(rs.Status.ReadyReplicas),
				ageCell(rs.ObjectMeta, now),
				names, images, metav1.FormatLabelSelector(rs.Spec.Selector),
			}
		}),
		Fields: registry.Func(func(rs *appsv1.ReplicaSet) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
		}),
	}
}

// DefaultReplicaSet applies apps/v1's ReplicaSet defaults: one replica and the pod
// template's defaults.
func DefaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptrTo[int32](1)
	}
	core.DefaultPodSpec(&rs.Spec.Template.Spec)
}

func validateReplicaSetSpec(s *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(deref32(s.Replicas), fldPath.Child("replicas"))
	errs = append(errs, nonNegative(s.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	// Kubernetes words the empty-selector error for ReplicaSets exactly as for Deployments.
	ok, selErrs := templateSelectorErrors(s.Selector, &s.Template, fldPath, "empty selector is invalid for deployment", "invalid label selector")
	errs = append(errs, selErrs...)
	if ok {
		errs = append(errs, replicaSetTemplateErrors(&s.Template, fldPath.Child("template"))...)
	}
	return errs
}

func validateReplicaSetStatus(s *appsv1.ReplicaSetStatus, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(s.Replicas, fldPath.Child("replicas"))
	errs = append(errs, nonNegative(s.FullyLabeledReplicas, fldPath.Child("fullyLabeledReplicas"))...)
	errs = append(errs, nonNegative(s.ReadyReplicas, fldPath.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(s.AvailableReplicas, fldPath.Child("availableReplicas"))...)
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fldPath.Child("observedGeneration"))...)
	const msg = "cannot be greater than status.replicas"
	errs = append(errs, statusNotAbove(s.FullyLabeledReplicas, s.Replicas, fldPath.Child("fullyLabeledReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.ReadyReplicas, s.Replicas, fldPath.Child("readyReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.AvailableReplicas, s.Replicas, fldPath.Child("availableReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.AvailableReplicas, s.ReadyReplicas, fldPath.Child("availableReplicas"), "cannot be greater than readyReplicas")...)
	return errs
}
