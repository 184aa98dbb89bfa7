// Package policy serves policy/v1 PodDisruptionBudgets.
package policy

import (
	"strconv"
	"strings"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

var supportedUnhealthyPodEvictionPolicies = sets.New(string(policyv1.IfHealthyBudget), string(policyv1.AlwaysAllow))

// PodDisruptionBudgetResource serves policy/v1 poddisruptionbudgets (short name pdb):
// namespaced, generation tracked, with a status subresource the disruption controller
// and evictions write, Kubernetes' validation and the
// NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE table.
func PodDisruptionBudgetResource() registry.Resource {
	return registry.Resource{
		GVK:             policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
		Plural:          "poddisruptionbudgets",
		Singular:        "poddisruptionbudget",
		ShortNames:      []string{"pdb"},
		Namespaced:      true,
		New:             func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:         func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		TrackGeneration: true,
		PrepareForCreate: registry.Hook(func(pdb *policyv1.PodDisruptionBudget) {
			pdb.Status = policyv1.PodDisruptionBudgetStatus{}
		}),
		Validate: registry.Func(func(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
			return ValidatePodDisruptionBudgetSpec(&pdb.Spec, false, field.NewPath("spec"))
		}),
		ValidateUpdate: registry.FuncUpdate(func(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
			// A selector stored before label values were checked stays acceptable.
			allowInvalid := len(ValidatePodDisruptionBudgetSpec(&policyv1.PodDisruptionBudgetSpec{Selector: old.Spec.Selector}, false, field.NewPath("spec"))) > 0
			return ValidatePodDisruptionBudgetSpec(&pdb.Spec, allowInvalid, field.NewPath("spec"))
		}),
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(func(pdb, _ *policyv1.PodDisruptionBudget) field.ErrorList {
				return ValidatePodDisruptionBudgetStatus(&pdb.Status, field.NewPath("status"))
			}),
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
			{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
			{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
			registry.AgeColumn,
		},
		Row: registry.FuncWith(func(pdb *policyv1.PodDisruptionBudget, now time.Time) []interface{} {
			minAvailable, maxUnavailable := "N/A", "N/A"
			if pdb.Spec.MinAvailable != nil {
				minAvailable = pdb.Spec.MinAvailable.String()
			}
			if pdb.Spec.MaxUnavailable != nil {
				maxUnavailable = pdb.Spec.MaxUnavailable.String()
			}
			return []interface{}{pdb.Name, minAvailable, maxUnavailable, int64(pdb.Status.DisruptionsAllowed), registry.HumanAge(pdb.CreationTimestamp, now)}
		}),
	}
}

// ValidatePodDisruptionBudgetSpec is Kubernetes' check of a PodDisruptionBudget's spec:
// minAvailable and maxUnavailable not both set, each a non-negative integer or a
// percentage up to 100%, a valid label selector (allowInvalidLabelValue keeps selectors
// stored before label values were checked) and a known unhealthyPodEvictionPolicy.
func ValidatePodDisruptionBudgetSpec(spec *policyv1.PodDisruptionBudgetSpec, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(fldPath, *spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	if spec.MinAvailable != nil {
		errs = append(errs, intOrPercent(*spec.MinAvailable, fldPath.Child("minAvailable"))...)
	}
	if spec.MaxUnavailable != nil {
		errs = append(errs, intOrPercent(*spec.MaxUnavailable, fldPath.Child("maxUnavailable"))...)
	}
	opts := metavalidation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	errs = append(errs, metavalidation.ValidateLabelSelector(spec.Selector, opts, fldPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && !supportedUnhealthyPodEvictionPolicies.Has(string(*p)) {
		errs = append(errs, field.NotSupported(fldPath.Child("unhealthyPodEvictionPolicy"), *p, sets.List(supportedUnhealthyPodEvictionPolicies)))
	}
	return errs
}

// ValidatePodDisruptionBudgetStatus checks a status write: valid conditions and no
// negative counter.
func ValidatePodDisruptionBudgetStatus(s *policyv1.PodDisruptionBudgetStatus, fldPath *field.Path) field.ErrorList {
	errs := metavalidation.ValidateConditions(s.Conditions, fldPath.Child("conditions"))
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.DisruptionsAllowed), fldPath.Child("disruptionsAllowed"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.CurrentHealthy), fldPath.Child("currentHealthy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.DesiredHealthy), fldPath.Child("desiredHealthy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.ExpectedPods), fldPath.Child("expectedPods"))...)
	return errs
}

// intOrPercent accepts a non-negative integer or a percentage up to 100%, with
// Kubernetes' messages.
func intOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		msgs := validation.IsValidPercent(v.StrVal)
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
		if len(msgs) == 0 {
			if n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); err == nil && n > 100 {
				errs = append(errs, field.Invalid(fldPath, v, "must not be greater than 100%"))
			}
		}
	case intstr.Int:
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)...)
	default:
		errs = append(errs, field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%%')"))
	}
	return errs
}
