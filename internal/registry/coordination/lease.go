// Package coordination serves coordination.k8s.io/v1 Leases: node heartbeats and the locks
// through which controllers elect a leader.
package coordination

import (
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// validStrategies are the Kubernetes-defined coordinated leader election strategies; other
// strategies must be domain-qualified ("example.com/mine").
var validStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// LeaseResource returns coordination.k8s.io/v1 Lease: namespaced, no status, Kubernetes'
// validation, and the NAME HOLDER AGE table.
func LeaseResource() registry.Resource {
	return registry.Resource{
		GVK:            coordinationv1.SchemeGroupVersion.WithKind("Lease"),
		Plural:         "leases",
		Singular:       "lease",
		Namespaced:     true,
		New:            func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:        func() runtime.Object { return &coordinationv1.LeaseList{} },
		Validate:       registry.Func(ValidateLease),
		ValidateUpdate: registry.FuncUpdate(func(obj, _ *coordinationv1.Lease) field.ErrorList { return ValidateLease(obj) }),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
			registry.AgeColumn,
		},
		Row: leaseRow,
	}
}

func asLease(obj runtime.Object) *coordinationv1.Lease {
	l, _ := obj.(*coordinationv1.Lease)
	return l
}

// ValidateLease checks a Lease's spec on create and update (no field is immutable):
// positive leaseDurationSeconds, non-negative leaseTransitions, a known or qualified
// strategy, and preferredHolder only together with a strategy.
func ValidateLease(l *coordinationv1.Lease) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	spec, p := &l.Spec, field.NewPath("spec")
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("leaseDurationSeconds"), *spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(p.Child("leaseTransitions"), *spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		// Kubernetes reports strategy errors one level deeper than the field
		// ("spec.strategy.strategy"); kept so messages match a real cluster.
		errs = append(errs, validateStrategy(*spec.Strategy, p.Child("strategy").Child("strategy"))...)
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(p.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

func validateStrategy(s coordinationv1.CoordinatedLeaseStrategy, p *field.Path) field.ErrorList {
	if !strings.Contains(string(s), "/") {
		if !slices.Contains(validStrategies, s) {
			return field.ErrorList{field.NotSupported(p, s, validStrategies)}
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(s)) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

// leaseRow prints an empty HOLDER for a lease nobody holds.
func leaseRow(obj runtime.Object, now time.Time) []interface{} {
	l := asLease(obj)
	if l == nil {
		return nil
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []interface{}{l.Name, holder, registry.HumanAge(l.CreationTimestamp, now)}
}
