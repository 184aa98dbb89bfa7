package apps

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

// statefulSetUpdateForbidden is Kubernetes' wording for a spec update touching anything
// but the mutable fields.
const statefulSetUpdateForbidden = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"

// StatefulSetResource serves apps/v1 statefulsets with their status and scale subresources.
// Names must be DNS labels since they become pod hostnames.
func StatefulSetResource() registry.Resource {
	return registry.Resource{
		GVK:             appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		Plural:          "statefulsets",
		Singular:        "statefulset",
		ShortNames:      []string{"sts"},
		Categories:      []string{"all"},
		Namespaced:      true,
		New:             func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:         func() runtime.Object { return &appsv1.StatefulSetList{} },
		NameValidation:  apimachineryvalidation.NameIsDNSLabel,
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(s *appsv1.StatefulSet) {
			s.Status = appsv1.StatefulSetStatus{}
		}),
		Default: registry.Hook(func(s *appsv1.StatefulSet) {
			DefaultStatefulSet(s)
			setClaimTemplateTypes(&s.Spec)
		}),
		// Stored in protobuf, the claim templates lose their apiVersion and kind (an
		// embedded TypeMeta has no protobuf field); kube-apiserver sets them on every
		// statefulset it serves (apps/v1 conversion, kubernetes#87583), and clients
		// that apply manifests carrying them rely on reading them back. The view is of
		// the resource itself: only FromStorage does anything.
		Storage: &registry.StorageView{
			GVR:       appsv1.SchemeGroupVersion.WithResource("statefulsets"),
			ToStorage: func(obj runtime.Object) runtime.Object { return obj },
			FromStorage: func(obj runtime.Object) runtime.Object {
				if s, ok := obj.(*appsv1.StatefulSet); ok && s != nil {
					setClaimTemplateTypes(&s.Spec)
				}
				return obj
			},
		},
		Validate: registry.Func(func(s *appsv1.StatefulSet) field.ErrorList {
			return validateStatefulSetSpec(&s.Spec, field.NewPath("spec"))
		}),
		ValidateUpdate: registry.FuncUpdate(func(s, o *appsv1.StatefulSet) field.ErrorList {
			return validateStatefulSetUpdate(s, o)
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(s, o *appsv1.StatefulSet) field.ErrorList {
				errs := validateStatefulSetStatus(&s.Status, field.NewPath("status"))
				return append(errs, collisionCountErrors(s.Status.CollisionCount, o.Status.CollisionCount)...)
			}),
		},
		Scale: registry.Scale(func(s *appsv1.StatefulSet) (int32, int32, string) {
			return deref32(s.Spec.Replicas), s.Status.Replicas, scaleSelector(s.Spec.Selector)
		}, func(s *appsv1.StatefulSet, replicas int32) { s.Spec.Replicas = &replicas }),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			stringColumn("Ready", "Number of the pod with ready state"),
			registry.AgeColumn,
			containersColumn,
			imagesColumn,
		},
		Row: registry.FuncWith(func(s *appsv1.StatefulSet, now time.Time) []interface{} {
			names, images := containerCells(s.Spec.Template.Spec.Containers)
			return []interface{}{
				s.Name,
				fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, deref32(s.Spec.Replicas)),
				ageCell(s.ObjectMeta, now),
				names, images,
			}
		}),
	}
}

// DefaultStatefulSet applies apps/v1's StatefulSet defaults: OrderedReady pod management,
// a RollingUpdate strategy with partition 0, Retain/Retain claim retention, one replica,
// ten kept revisions, the pod template's defaults, and the claim templates' defaults
// (volumeMode Filesystem, status.phase Pending).
func DefaultStatefulSet(s *appsv1.StatefulSet) {
	spec := &s.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && spec.UpdateStrategy.RollingUpdate != nil && spec.UpdateStrategy.RollingUpdate.Partition == nil {
		spec.UpdateStrategy.RollingUpdate.Partition = ptrTo[int32](0)
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		spec.Replicas = ptrTo[int32](1)
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptrTo[int32](10)
	}
	core.DefaultPodSpec(&spec.Template.Spec)
	for i := range spec.VolumeClaimTemplates {
		c := &spec.VolumeClaimTemplates[i]
		if c.Spec.VolumeMode == nil {
			c.Spec.VolumeMode = ptrTo(v1.PersistentVolumeFilesystem)
		}
		if c.Status.Phase == "" {
			c.Status.Phase = v1.ClaimPending
		}
	}
}

func validateStatefulSetSpec(s *appsv1.StatefulSetSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(fldPath.Child("podManagementPolicy"), s.PodManagementPolicy, fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}

	usPath := fldPath.Child("updateStrategy")
	switch s.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(usPath, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(usPath.Child("rollingUpdate"), s.UpdateStrategy.RollingUpdate, fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdateStatefulSet(ru, usPath.Child("rollingUpdate"))...)
		}
	default:
		errs = append(errs, field.Invalid(usPath, s.UpdateStrategy, fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}

	if p := s.PersistentVolumeClaimRetentionPolicy; p != nil {
		pPath := fldPath.Child("persistentVolumeClaimRetentionPolicy")
		errs = append(errs, validateRetentionPolicyType(p.WhenDeleted, pPath.Child("whenDeleted"))...)
		errs = append(errs, validateRetentionPolicyType(p.WhenScaled, pPath.Child("whenScaled"))...)
	}

	errs = append(errs, nonNegative(deref32(s.Replicas), fldPath.Child("replicas"))...)
	errs = append(errs, nonNegative(s.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	if s.Ordinals != nil {
		errs = append(errs, nonNegative(s.Ordinals.Start, fldPath.Child("ordinals.start"))...)
	}

	ok, selErrs := templateSelectorErrors(s.Selector, &s.Template, fldPath, "empty selector is invalid for statefulset", "")
	errs = append(errs, selErrs...)
	if ok {
		// Kubernetes checks only the template's metadata here: the pod spec refers to volumes
		// that volumeClaimTemplates supply, so it is validated when pods are created.
		tmplPath := fldPath.Child("template")
		errs = append(errs, metav1validation.ValidateLabels(s.Template.Labels, tmplPath.Child("labels"))...)
		errs = append(errs, apimachineryvalidation.ValidateAnnotations(s.Template.Annotations, tmplPath.Child("annotations"))...)
	}
	errs = append(errs, alwaysRestartErrors(&s.Template, fldPath.Child("template"), "StatefulSet")...)
	return errs
}

func validateRollingUpdateStatefulSet(ru *appsv1.RollingUpdateStatefulSetStrategy, fldPath *field.Path) field.ErrorList {
	errs := nonNegativePtr(ru.Partition, fldPath.Child("partition"))
	if ru.MaxUnavailable != nil {
		p := fldPath.Child("maxUnavailable")
		errs = append(errs, positiveIntOrPercent(*ru.MaxUnavailable, p)...)
		if intOrPercentValue(*ru.MaxUnavailable) == 0 {
			errs = append(errs, field.Invalid(p, *ru.MaxUnavailable, "cannot be 0"))
		}
		errs = append(errs, notMoreThan100Percent(*ru.MaxUnavailable, p)...)
	}
	return errs
}

func validateRetentionPolicyType(t appsv1.PersistentVolumeClaimRetentionPolicyType, fldPath *field.Path) field.ErrorList {
	switch t {
	case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, t, []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)})}
}

// validateStatefulSetUpdate validates the new spec and refuses changes outside the fields
// Kubernetes lets a StatefulSet update touch.
// setClaimTemplateTypes sets apiVersion v1 and kind PersistentVolumeClaim on every
// volume claim template, as kube-apiserver's apps/v1 conversion does on output.
func setClaimTemplateTypes(spec *appsv1.StatefulSetSpec) {
	for i := range spec.VolumeClaimTemplates {
		spec.VolumeClaimTemplates[i].APIVersion = "v1"
		spec.VolumeClaimTemplates[i].Kind = "PersistentVolumeClaim"
	}
}

func validateStatefulSetUpdate(s, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateStatefulSetSpec(&s.Spec, field.NewPath("spec"))
	// The claim templates' apiVersion and kind are not part of the spec Kubernetes
	// compares (its internal version has none): a manifest that carries them, or not,
	// updates the same statefulset.
	oldSpec := old.Spec.DeepCopy()
	setClaimTemplateTypes(oldSpec)
	masked := s.Spec.DeepCopy()
	setClaimTemplateTypes(masked)
	masked.Replicas = old.Spec.Replicas
	masked.Ordinals = old.Spec.Ordinals
	masked.Template = old.Spec.Template
	masked.UpdateStrategy = old.Spec.UpdateStrategy
	masked.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	masked.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	masked.MinReadySeconds = old.Spec.MinReadySeconds
	if !apiequality.Semantic.DeepEqual(*masked, *oldSpec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), statefulSetUpdateForbidden))
	}
	return errs
}

func validateStatefulSetStatus(s *appsv1.StatefulSetStatus, fldPath *field.Path) field.ErrorList {
	errs := nonNegative(s.Replicas, fldPath.Child("replicas"))
	errs = append(errs, nonNegative(s.ReadyReplicas, fldPath.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(s.CurrentReplicas, fldPath.Child("currentReplicas"))...)
	errs = append(errs, nonNegative(s.UpdatedReplicas, fldPath.Child("updatedReplicas"))...)
	errs = append(errs, nonNegative(s.AvailableReplicas, fldPath.Child("availableReplicas"))...)
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fldPath.Child("observedGeneration"))...)
	errs = append(errs, nonNegativePtr(s.CollisionCount, fldPath.Child("collisionCount"))...)
	const msg = "cannot be greater than status.replicas"
	errs = append(errs, statusNotAbove(s.ReadyReplicas, s.Replicas, fldPath.Child("readyReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.CurrentReplicas, s.Replicas, fldPath.Child("currentReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.UpdatedReplicas, s.Replicas, fldPath.Child("updatedReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.AvailableReplicas, s.Replicas, fldPath.Child("availableReplicas"), msg)...)
	errs = append(errs, statusNotAbove(s.AvailableReplicas, s.ReadyReplicas, fldPath.Child("availableReplicas"), "cannot be greater than status.readyReplicas")...)
	return errs
}
