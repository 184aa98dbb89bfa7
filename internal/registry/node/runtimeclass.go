// Package node serves node.k8s.io/v1 RuntimeClasses.
package node

import (
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
)

// RuntimeClassResource serves node.k8s.io/v1 runtimeclasses: cluster-scoped, validated
// as Kubernetes does (handler a DNS label that never changes, overhead, scheduling) with
// the NAME HANDLER AGE table.
func RuntimeClassResource() registry.Resource {
	return registry.Resource{
		GVK:            nodev1.SchemeGroupVersion.WithKind("RuntimeClass"),
		Plural:         "runtimeclasses",
		Singular:       "runtimeclass",
		New:            func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList:        func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Validate:       registry.Func(ValidateRuntimeClass),
		ValidateUpdate: registry.FuncUpdate(ValidateRuntimeClassUpdate),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Handler", Type: "string", Description: nodev1.RuntimeClass{}.SwaggerDoc()["handler"]},
			registry.AgeColumn,
		},
		Row: registry.FuncWith(func(rc *nodev1.RuntimeClass, now time.Time) []interface{} {
			return []interface{}{rc.Name, rc.Handler, registry.HumanAge(rc.CreationTimestamp, now)}
		}),
	}
}

// ValidateRuntimeClass is Kubernetes' check of a RuntimeClass: a handler that is a DNS
// label, an overhead valid as container limits, a scheduling nodeSelector of valid labels
// and tolerations valid as a pod's, none listed twice.
func ValidateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	var errs field.ErrorList
	if rc.Handler == "" {
		errs = append(errs, field.Required(field.NewPath("handler"), ""))
	} else {
		for _, msg := range apivalidation.NameIsDNSLabel(rc.Handler, false) {
			errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, msg))
		}
	}
	if rc.Overhead != nil {
		p := field.NewPath("overhead")
		errs = append(errs, core.ValidateResourceRequirements(&v1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, p)...)
	}
	if s := rc.Scheduling; s != nil {
		p := field.NewPath("scheduling")
		errs = append(errs, metavalidation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
		errs = append(errs, validateTolerations(s.Tolerations, p.Child("tolerations"))...)
	}
	return errs
}

// ValidateRuntimeClassUpdate checks an update as a create, and refuses a changed
// handler.
func ValidateRuntimeClassUpdate(rc, old *nodev1.RuntimeClass) field.ErrorList {
	errs := ValidateRuntimeClass(rc)
	return append(errs, apivalidation.ValidateImmutableField(rc.Handler, old.Handler, field.NewPath("handler"))...)
}

func validateTolerations(tolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	errs := core.ValidateTolerations(tolerations, fldPath)
	type key struct {
		key, value string
		op         v1.TolerationOperator
		effect     v1.TaintEffect
	}
	seen := map[key]bool{}
	for i, t := range tolerations {
		k := key{t.Key, t.Value, t.Operator, t.Effect}
		if seen[k] {
			errs = append(errs, field.Duplicate(fldPath.Index(i), t))
		}
		seen[k] = true
	}
	return errs
}
