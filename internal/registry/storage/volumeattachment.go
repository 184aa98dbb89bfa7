package storage

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

const (
	maxAttachedVolumeMetadataSize = 256 * (1 << 10)
	maxVolumeErrorMessageSize     = 1024
)

// VolumeAttachmentResource serves storage.k8s.io/v1 volumeattachments: cluster-scoped
// requests to attach a volume (a PersistentVolume by name, or an inline volume spec) to
// a node by a CSI attacher, with an immutable spec and a status subresource the
// attacher writes; the NAME ATTACHER PV NODE ATTACHED AGE table.
func VolumeAttachmentResource() registry.Resource {
	desc := storagev1.VolumeAttachmentSpec{}.SwaggerDoc()
	return registry.Strategy[*storagev1.VolumeAttachment]{
		PrepareForCreate: func(va *storagev1.VolumeAttachment) { va.Status = storagev1.VolumeAttachmentStatus{} },
		Validate:         ValidateVolumeAttachment,
		ValidateUpdate: func(va, old *storagev1.VolumeAttachment) field.ErrorList {
			errs := ValidateVolumeAttachment(va)
			return append(errs, apivalidation.ValidateImmutableField(va.Spec, old.Spec, field.NewPath("spec"))...)
		},
		StatusValidateUpdate: func(va, _ *storagev1.VolumeAttachment) field.ErrorList { return ValidateVolumeAttachment(va) },
		Row: func(va *storagev1.VolumeAttachment, now time.Time) []interface{} {
			pv := ""
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, registry.HumanAge(va.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:      storagev1.SchemeGroupVersion.WithKind("VolumeAttachment"),
		Plural:   "volumeattachments",
		Singular: "volumeattachment",
		New:      func() runtime.Object { return &storagev1.VolumeAttachment{} },
		NewList:  func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Attacher", Type: "string", Format: "name", Description: desc["attacher"]},
			{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
			{Name: "Node", Type: "string", Description: desc["nodeName"]},
			{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
			registry.AgeColumn,
		},
	})
}

// ValidateVolumeAttachment is Kubernetes' check of a VolumeAttachment: a valid attacher
// name, exactly one source, a valid node name, attachment metadata up to 256 KiB and
// error messages up to 1024 bytes with non-negative codes.
func ValidateVolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateCSIDriverName(va.Spec.Attacher, spec.Child("attacher"))
	errs = append(errs, validateVolumeAttachmentSource(&va.Spec.Source, spec.Child("source"))...)
	for _, msg := range apivalidation.NameIsDNSSubdomain(va.Spec.NodeName, false) {
		errs = append(errs, field.Invalid(spec.Child("nodeName"), va.Spec.NodeName, msg))
	}
	status := field.NewPath("status")
	var size int
	for k, v := range va.Status.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachedVolumeMetadataSize {
		errs = append(errs, field.TooLong(status.Child("attachmentMetadata"), "", maxAttachedVolumeMetadataSize))
	}
	errs = append(errs, validateVolumeError(va.Status.AttachError, status.Child("attachError"))...)
	errs = append(errs, validateVolumeError(va.Status.DetachError, status.Child("detachError"))...)
	if n := va.Spec.Source.PersistentVolumeName; n != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
			errs = append(errs, field.Invalid(field.NewPath("spec.source.persistentVolumeName"), *n, msg))
		}
	}
	return errs
}

func validateVolumeAttachmentSource(src *storagev1.VolumeAttachmentSource, fldPath *field.Path) field.ErrorList {
	const exactlyOne = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
	switch {
	case src.InlineVolumeSpec == nil && src.PersistentVolumeName == nil:
		return field.ErrorList{field.Required(fldPath, exactlyOne)}
	case src.InlineVolumeSpec != nil && src.PersistentVolumeName != nil:
		return field.ErrorList{field.Forbidden(fldPath, exactlyOne)}
	case src.PersistentVolumeName != nil:
		if *src.PersistentVolumeName == "" {
			return field.ErrorList{field.Required(fldPath.Child("persistentVolumeName"), "must specify non empty persistentVolumeName")}
		}
		return nil
	}
	return validateInlineVolumeSpec(src.InlineVolumeSpec, fldPath.Child("inlineVolumeSpec"))
}

// validateInlineVolumeSpec applies Kubernetes' rules for a PersistentVolume spec given
// inline (CSI migration): a CSI source with driver and volumeHandle, no claimRef,
// capacity, nodeAffinity or storageClassName, reclaim policy Retain and volume mode
// Filesystem when given.
func validateInlineVolumeSpec(spec *corev1.PersistentVolumeSpec, fldPath *field.Path) field.ErrorList {
	const ctx = " in the context of inline volumes"
	var errs field.ErrorList
	if spec.ClaimRef != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("claimRef"), "may not be specified"+ctx))
	}
	if len(spec.Capacity) != 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("capacity"), "may not be specified"+ctx))
	}
	if spec.CSI == nil {
		errs = append(errs, field.Required(fldPath.Child("csi"), "has to be specified"+ctx))
	} else {
		errs = append(errs, ValidateCSIDriverName(spec.CSI.Driver, fldPath.Child("csi", "driver"))...)
		if spec.CSI.VolumeHandle == "" {
			errs = append(errs, field.Required(fldPath.Child("csi", "volumeHandle"), ""))
		}
	}
	if p := spec.PersistentVolumeReclaimPolicy; p != "" && p != corev1.PersistentVolumeReclaimRetain {
		errs = append(errs, field.Forbidden(fldPath.Child("persistentVolumeReclaimPolicy"), "may only be "+string(corev1.PersistentVolumeReclaimRetain)+ctx))
	}
	if spec.NodeAffinity != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("nodeAffinity"), "may not be specified"+ctx))
	}
	if spec.StorageClassName != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("storageClassName"), "may not be specified"+ctx))
	}
	if m := spec.VolumeMode; m != nil && *m != corev1.PersistentVolumeFilesystem {
		errs = append(errs, field.Forbidden(fldPath.Child("volumeMode"), "may not specify volumeMode other than "+string(corev1.PersistentVolumeFilesystem)+ctx))
	}
	return errs
}

func validateVolumeError(e *storagev1.VolumeError, fldPath *field.Path) field.ErrorList {
	if e == nil {
		return nil
	}
	var errs field.ErrorList
	if len(e.Message) > maxVolumeErrorMessageSize {
		errs = append(errs, field.TooLong(fldPath.Child("message"), "", maxVolumeErrorMessageSize))
	}
	if e.ErrorCode != nil && *e.ErrorCode < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("errorCode"), *e.ErrorCode, validation.InclusiveRangeError(0, math.MaxInt32)))
	}
	return errs
}
