package storage

import (
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// VolumeAttributesClassResource serves storage.k8s.io/v1 volumeattributesclasses
// (short name "vac"): cluster-scoped sets of mutable volume attributes a CSI driver
// applies to a claim, with an immutable driver name and parameters, and the
// NAME DRIVERNAME AGE table.
func VolumeAttributesClassResource() registry.Resource {
	return registry.Strategy[*storagev1.VolumeAttributesClass]{
		Validate:       ValidateVolumeAttributesClass,
		ValidateUpdate: ValidateVolumeAttributesClassUpdate,
		Row: func(c *storagev1.VolumeAttributesClass, now time.Time) []interface{} {
			return []interface{}{c.Name, c.DriverName, registry.HumanAge(c.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:        storagev1.SchemeGroupVersion.WithKind("VolumeAttributesClass"),
		Plural:     "volumeattributesclasses",
		Singular:   "volumeattributesclass",
		ShortNames: []string{"vac"},
		New:        func() runtime.Object { return &storagev1.VolumeAttributesClass{} },
		NewList:    func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "DriverName", Type: "string", Description: storagev1.VolumeAttributesClass{}.SwaggerDoc()["driverName"]},
			registry.AgeColumn,
		},
	})
}

// ValidateVolumeAttributesClass is Kubernetes' check of a VolumeAttributesClass: a
// driver name that is a qualified name (compared in lower case, as provisioners are)
// and at least one parameter, within the StorageClass parameters' bounds.
func ValidateVolumeAttributesClass(c *storagev1.VolumeAttributesClass) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("driverName")
	if c.DriverName == "" {
		errs = append(errs, field.Required(p, ""))
	} else {
		lower := strings.ToLower(c.DriverName)
		for _, msg := range validation.IsQualifiedName(lower) {
			errs = append(errs, field.Invalid(p, lower, msg))
		}
	}
	params := field.NewPath("parameters")
	errs = append(errs, validateParameters(c.Parameters, params)...)
	if len(c.Parameters) == 0 {
		errs = append(errs, field.Required(params, "must contain at least one key/value pair"))
	}
	return errs
}

// ValidateVolumeAttributesClassUpdate checks c like ValidateVolumeAttributesClass and
// refuses changes to its driver name and parameters, which volumes already carry.
func ValidateVolumeAttributesClassUpdate(c, old *storagev1.VolumeAttributesClass) field.ErrorList {
	var errs field.ErrorList
	if c.DriverName != old.DriverName {
		errs = append(errs, field.Forbidden(field.NewPath("driverName"), "updates to driverName are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(c.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	return append(errs, ValidateVolumeAttributesClass(c)...)
}
