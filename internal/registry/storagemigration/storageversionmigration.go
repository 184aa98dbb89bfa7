// Package storagemigration serves storagemigration.k8s.io/v1 StorageVersionMigrations.
// tranche stores every object in the version it serves, so no migrator acts on them;
// they are kept and validated as kube-apiserver does.
package storagemigration

import (
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// StorageVersionMigrationResource serves storageversionmigrations: cluster-scoped, an
// immutable spec naming the group and resource to migrate, a status subresource whose
// Succeeded and Failed conditions exclude each other and never turn back, and the
// NAME RESOURCE STATUS table.
func StorageVersionMigrationResource() registry.Resource {
	return registry.Strategy[*svmv1.StorageVersionMigration]{
		PrepareForCreate: func(svm *svmv1.StorageVersionMigration) { svm.Status = svmv1.StorageVersionMigrationStatus{} },
		Validate:         ValidateStorageVersionMigration,
		ValidateUpdate: func(svm, old *svmv1.StorageVersionMigration) field.ErrorList {
			errs := ValidateStorageVersionMigration(svm)
			return append(errs, apivalidation.ValidateImmutableField(svm.Spec, old.Spec, field.NewPath("spec"))...)
		},
		StatusValidateUpdate: ValidateStatusUpdate,
		Row: func(svm *svmv1.StorageVersionMigration, _ time.Time) []interface{} {
			status := "Unknown"
			for _, c := range svm.Status.Conditions {
				if c.Status != metav1.ConditionTrue {
					continue
				}
				switch svmv1.MigrationConditionType(c.Type) {
				case svmv1.MigrationRunning, svmv1.MigrationFailed, svmv1.MigrationSucceeded:
					status = c.Type
				}
			}
			return []interface{}{svm.Name, svm.Spec.Resource.String(), status}
		},
	}.Apply(registry.Resource{
		GVK:      svmv1.SchemeGroupVersion.WithKind("StorageVersionMigration"),
		Plural:   "storageversionmigrations",
		Singular: "storageversionmigration",
		New:      func() runtime.Object { return &svmv1.StorageVersionMigration{} },
		NewList:  func() runtime.Object { return &svmv1.StorageVersionMigrationList{} },
		Columns: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Resource", Type: "string", Description: "GroupResource to migrate"},
			{Name: "Status", Type: "string", Description: "Status of the migration"},
		},
	})
}

// ValidateStorageVersionMigration requires spec.resource.resource, a DNS-1035 label,
// and a DNS subdomain group when one is given.
func ValidateStorageVersionMigration(svm *svmv1.StorageVersionMigration) field.ErrorList {
	var errs field.ErrorList
	res := field.NewPath("spec", "resource")
	if r := svm.Spec.Resource.Resource; r == "" {
		errs = append(errs, field.Required(res.Child("resource"), "resource is required to be set"))
	} else if msgs := validation.IsDNS1035Label(r); len(msgs) > 0 {
		errs = append(errs, field.Invalid(res.Child("resource"), r, strings.Join(msgs, ",")))
	}
	if g := svm.Spec.Resource.Group; g != "" {
		if msgs := validation.IsDNS1123Subdomain(g); len(msgs) > 0 {
			errs = append(errs, field.Invalid(res.Child("group"), g, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// ValidateStatusUpdate checks a status write: a numeric resourceVersion that never
// changes once set, valid conditions, Succeeded and Failed not both true, neither
// turning false once true.
func ValidateStatusUpdate(svm, old *svmv1.StorageVersionMigration) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status")
	if rv := svm.Status.ResourceVersion; rv != "" {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			errs = append(errs, field.Invalid(p.Child("resourceVersion"), rv, err.Error()))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(svm.Status.Conditions, p.Child("conditions"))...)
	if old.Status.ResourceVersion != "" && old.Status.ResourceVersion != svm.Status.ResourceVersion {
		errs = append(errs, field.Invalid(p.Child("resourceVersion"), svm.Status.ResourceVersion, "field is immutable"))
	}
	succeeded := func(s *svmv1.StorageVersionMigration) bool {
		return apimeta.IsStatusConditionTrue(s.Status.Conditions, string(svmv1.MigrationSucceeded))
	}
	failed := func(s *svmv1.StorageVersionMigration) bool {
		return apimeta.IsStatusConditionTrue(s.Status.Conditions, string(svmv1.MigrationFailed))
	}
	if succeeded(svm) && failed(svm) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if succeeded(old) && !succeeded(svm) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if failed(old) && !failed(svm) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}
