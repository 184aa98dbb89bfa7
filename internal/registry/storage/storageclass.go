// Package storage serves storage.k8s.io/v1 StorageClasses.
package storage

import (
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// AnnotationIsDefault marks the StorageClass that claims without a class use;
// AnnotationBetaIsDefault is its older spelling, still honoured.
const (
	AnnotationIsDefault     = "storageclass.kubernetes.io/is-default-class"
	AnnotationBetaIsDefault = "storageclass.beta.kubernetes.io/is-default-class"
)

// Bounds on provisioner parameters, as Kubernetes enforces them.
const (
	maxParameters     = 512
	maxParametersSize = 256 * (1 << 10)
)

var (
	supportedReclaimPolicies = []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain}
	supportedBindingModes    = []storagev1.VolumeBindingMode{storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer}
)

// StorageClassResource returns storage.k8s.io/v1 StorageClass: cluster-scoped, short name
// "sc", reclaimPolicy defaulted to Delete and volumeBindingMode to Immediate, provisioner,
// parameters, reclaimPolicy and volumeBindingMode immutable, and the
// NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE table.
func StorageClassResource() registry.Resource {
	return registry.Resource{
		GVK:            storagev1.SchemeGroupVersion.WithKind("StorageClass"),
		Plural:         "storageclasses",
		Singular:       "storageclass",
		ShortNames:     []string{"sc"},
		New:            func() runtime.Object { return &storagev1.StorageClass{} },
		NewList:        func() runtime.Object { return &storagev1.StorageClassList{} },
		Default:        defaultStorageClass,
		Validate:       registry.Func(ValidateStorageClass),
		ValidateUpdate: registry.FuncUpdate(ValidateStorageClassUpdate),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Provisioner", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["provisioner"]},
			{Name: "ReclaimPolicy", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["reclaimPolicy"]},
			{Name: "VolumeBindingMode", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["volumeBindingMode"]},
			{Name: "AllowVolumeExpansion", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["allowVolumeExpansion"]},
			registry.AgeColumn,
		},
		Row: storageClassRow,
	}
}

func asClass(obj runtime.Object) *storagev1.StorageClass {
	c, _ := obj.(*storagev1.StorageClass)
	return c
}

func defaultStorageClass(obj runtime.Object) {
	c := asClass(obj)
	if c == nil {
		return
	}
	if c.ReclaimPolicy == nil {
		c.ReclaimPolicy = new(corev1.PersistentVolumeReclaimDelete)
	}
	if c.VolumeBindingMode == nil {
		c.VolumeBindingMode = new(storagev1.VolumeBindingImmediate)
	}
}

// ValidateStorageClass checks a (defaulted) StorageClass: a qualified provisioner name,
// bounded parameters, a supported reclaim policy and binding mode, and allowed topologies.
func ValidateStorageClass(c *storagev1.StorageClass) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	if c.Provisioner == "" {
		errs = append(errs, field.Required(field.NewPath("provisioner"), ""))
	} else {
		// Provisioner names are matched case-insensitively, so only their shape counts.
		lower := strings.ToLower(c.Provisioner)
		for _, msg := range validation.IsQualifiedName(lower) {
			errs = append(errs, field.Invalid(field.NewPath("provisioner"), lower, msg))
		}
	}
	errs = append(errs, validateParameters(c.Parameters, field.NewPath("parameters"))...)
	if c.ReclaimPolicy != nil && *c.ReclaimPolicy != "" && !slices.Contains(supportedReclaimPolicies, *c.ReclaimPolicy) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *c.ReclaimPolicy, supportedReclaimPolicies))
	}
	if c.VolumeBindingMode == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if !slices.Contains(supportedBindingModes, *c.VolumeBindingMode) {
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *c.VolumeBindingMode, supportedBindingModes))
	}
	return append(errs, validateAllowedTopologies(c.AllowedTopologies, field.NewPath("allowedTopologies"))...)
}

// ValidateStorageClassUpdate checks c like ValidateStorageClass and refuses changes to
// what provisioned volumes already depend on.
func ValidateStorageClassUpdate(c, old *storagev1.StorageClass) field.ErrorList {
	errs := ValidateStorageClass(c)
	if c == nil || old == nil {
		return errs
	}
	if !apiequality.Semantic.DeepEqual(c.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if c.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(c.ReclaimPolicy, old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(errs, apivalidation.ValidateImmutableField(c.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

func validateParameters(params map[string]string, p *field.Path) field.ErrorList {
	if len(params) > maxParameters {
		return field.ErrorList{field.TooLong(p, "", maxParameters)}
	}
	var errs field.ErrorList
	size := 0
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k == "" {
			errs = append(errs, field.Invalid(p, k, "field can not be empty."))
		}
		size += len(k) + len(params[k])
	}
	if size > maxParametersSize {
		errs = append(errs, field.TooLong(p, "", maxParametersSize))
	}
	return errs
}

// validateAllowedTopologies checks each term's label requirements and that no two terms
// are the same.
func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var seen []map[string]sets.Set[string]
	for i, term := range terms {
		idx := p.Index(i)
		exprs := map[string]sets.Set[string]{}
		for j, req := range term.MatchLabelExpressions {
			rp := idx.Child("matchLabelExpressions").Index(j)
			values := sets.New[string]()
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), ""))
			}
			for k, v := range req.Values {
				if values.Has(v) {
					errs = append(errs, field.Duplicate(rp.Child("values").Index(k), v))
				}
				values.Insert(v)
			}
			errs = append(errs, metav1validation.ValidateLabelName(req.Key, rp.Child("key"))...)
			if _, dup := exprs[req.Key]; dup {
				errs = append(errs, field.Duplicate(rp.Child("key"), req.Key))
			}
			exprs[req.Key] = values
		}
		for _, prev := range seen {
			if apiequality.Semantic.DeepEqual(prev, exprs) {
				errs = append(errs, field.Duplicate(idx.Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, exprs)
	}
	return errs
}

// storageClassRow prints "(default)" after the default class's name and the effective
// policy, mode and expansion flag even when they are unset.
func storageClassRow(obj runtime.Object, now time.Time) []interface{} {
	c := asClass(obj)
	if c == nil {
		return nil
	}
	name := c.Name
	if c.Annotations[AnnotationIsDefault] == "true" || c.Annotations[AnnotationBetaIsDefault] == "true" {
		name += " (default)"
	}
	reclaim := string(corev1.PersistentVolumeReclaimDelete)
	if c.ReclaimPolicy != nil {
		reclaim = string(*c.ReclaimPolicy)
	}
	mode := string(storagev1.VolumeBindingImmediate)
	if c.VolumeBindingMode != nil {
		mode = string(*c.VolumeBindingMode)
	}
	expansion := c.AllowVolumeExpansion != nil && *c.AllowVolumeExpansion
	return []interface{}{name, c.Provisioner, reclaim, mode, expansion, registry.HumanAge(c.CreationTimestamp, now)}
}
