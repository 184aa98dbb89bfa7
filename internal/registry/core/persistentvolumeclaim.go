package core

import (
	"fmt"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// PersistentVolumeClaimResource returns the core/v1 PersistentVolumeClaim resource with
// its status subresource, Kubernetes' defaults, validation and update rules, and
// kubectl's table.
func PersistentVolumeClaimResource() registry.Resource {
	return registry.Resource{
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"},
		Plural:     "persistentvolumeclaims",
		Singular:   "persistentvolumeclaim",
		ShortNames: []string{"pvc"},
		Namespaced: true,
		New:        func() runtime.Object { return &v1.PersistentVolumeClaim{} },
		NewList:    func() runtime.Object { return &v1.PersistentVolumeClaimList{} },
		PrepareForCreate: registry.Hook(func(pvc *v1.PersistentVolumeClaim) {
			pvc.Status = v1.PersistentVolumeClaimStatus{}
		}),
		Default:        registry.Hook(DefaultPersistentVolumeClaim),
		Validate:       registry.Func(ValidatePersistentVolumeClaim),
		ValidateUpdate: registry.FuncUpdate(ValidatePersistentVolumeClaimUpdate),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(obj, _ *v1.PersistentVolumeClaim) field.ErrorList {
				return ValidatePersistentVolumeClaimStatus(obj)
			}),
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Status", Type: "string", Description: v1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]},
			{Name: "Volume", Type: "string", Description: v1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"]},
			{Name: "Capacity", Type: "string", Description: v1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]},
			{Name: "Access Modes", Type: "string", Description: v1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]},
			{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
			{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
			registry.AgeColumn,
			{Name: "VolumeMode", Type: "string", Priority: 1, Description: v1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"]},
		},
		Row: registry.FuncWith(func(pvc *v1.PersistentVolumeClaim, now time.Time) []interface{} {
			return pvcRow(pvc, now)
		}),
	}
}

// DefaultPersistentVolumeClaim sets phase Pending and volume mode Filesystem.
func DefaultPersistentVolumeClaim(pvc *v1.PersistentVolumeClaim) {
	if pvc == nil {
		return
	}
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = v1.ClaimPending
	}
	if pvc.Spec.VolumeMode == nil {
		m := v1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &m
	}
}

// ValidatePersistentVolumeClaim checks a claim's spec: access modes, selector, a
// positive storage request, class name and volume mode.
func ValidatePersistentVolumeClaim(pvc *v1.PersistentVolumeClaim) field.ErrorList {
	if pvc == nil {
		return nil
	}
	spec := &pvc.Spec
	p := field.NewPath("spec")
	errs := pvValidateAccessModes(spec.AccessModes, p.Child("accessModes"), "at least 1 access mode is required")
	if spec.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	storagePath := p.Child("resources").Key(string(v1.ResourceStorage))
	if q, ok := spec.Resources.Requests[v1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(storagePath, q.String(), "must be greater than zero"))
	}
	if c := spec.StorageClassName; c != nil && *c != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*c, false) {
			errs = append(errs, field.Invalid(p.Child("storageClassName"), *c, msg))
		}
	}
	if m := spec.VolumeMode; m != nil && !svcIn(string(*m), pvVolumeModes) {
		errs = append(errs, field.NotSupported(p.Child("volumeMode"), *m, pvVolumeModes))
	}
	return errs
}

// ValidatePersistentVolumeClaimUpdate checks an update: the spec is immutable except
// volumeName while unset, storageClassName of an unbound claim that had none, and
// resources.requests of a bound claim, which may only grow.
func ValidatePersistentVolumeClaimUpdate(pvc, old *v1.PersistentVolumeClaim) field.ErrorList {
	if pvc == nil || old == nil {
		return ValidatePersistentVolumeClaim(pvc)
	}
	errs := ValidatePersistentVolumeClaim(pvc)
	newSpec, oldSpec := pvc.Spec.DeepCopy(), old.Spec.DeepCopy()
	if old.Spec.VolumeName == "" {
		// The binder sets volumeName once.
		oldSpec.VolumeName = newSpec.VolumeName
	}
	if old.Spec.StorageClassName == nil && old.Spec.VolumeName == "" {
		// Retroactive default class assignment (GA in Kubernetes 1.28): an unbound
		// claim without a class may get one.
		oldSpec.StorageClassName = newSpec.StorageClassName
	}
	if pvc.Status.Phase == v1.ClaimBound && newSpec.Resources.Requests != nil {
		if q, ok := old.Spec.Resources.Requests[v1.ResourceStorage]; ok {
			newSpec.Resources.Requests[v1.ResourceStorage] = q
		} else {
			delete(newSpec.Resources.Requests, v1.ResourceStorage)
		}
	}
	if !apiequality.Semantic.DeepEqual(newSpec, oldSpec) {
		diff := cmp.Diff(oldSpec, newSpec)
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			fmt.Sprintf("spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n%v", diff)))
	}
	newSize := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	oldSize := old.Spec.Resources.Requests[v1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than previous value"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	return errs
}

// ValidatePersistentVolumeClaimStatus checks a status write: access modes are known
// and capacities are not negative.
func ValidatePersistentVolumeClaimStatus(pvc *v1.PersistentVolumeClaim) field.ErrorList {
	if pvc == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("status")
	for _, m := range pvc.Status.AccessModes {
		if !svcIn(string(m), pvAccessModes) {
			errs = append(errs, field.NotSupported(p.Child("accessModes"), m, pvAccessModes))
		}
	}
	for name, q := range pvc.Status.Capacity {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("capacity").Key(string(name)), q.String(), apivalidation.IsNegativeErrorMsg))
		}
	}
	return errs
}

func pvcRow(pvc *v1.PersistentVolumeClaim, now time.Time) []interface{} {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		modes = pvAccessModesString(pvc.Status.AccessModes)
		q := pvc.Status.Capacity[v1.ResourceStorage]
		capacity = q.String()
	}
	class := ""
	if c, ok := pvc.Annotations[pvBetaStorageClassAnnotation]; ok {
		class = c
	} else if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	vac := "<unset>"
	if pvc.Status.CurrentVolumeAttributesClassName != nil {
		vac = *pvc.Status.CurrentVolumeAttributesClassName
	}
	mode := "<unset>"
	if pvc.Spec.VolumeMode != nil {
		mode = string(*pvc.Spec.VolumeMode)
	}
	return []interface{}{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, class, vac,
		registry.HumanAge(pvc.CreationTimestamp, now), mode}
}
