package core

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// nsStandardFinalizers are the finalizer names that need no domain prefix.
var nsStandardFinalizers = sets.New(string(v1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)

// nsColumns are kubectl's namespace columns.
var nsColumns = []metav1.TableColumnDefinition{
	registry.NameColumn,
	{Name: "Status", Type: "string", Description: "The status of the namespace"},
	registry.AgeColumn,
}

// NamespaceResource is core/v1 namespaces: cluster-scoped, short name "ns", names are
// DNS-1123 labels, with a status subresource. A new namespace is Active and carries the
// "kubernetes" finalizer; spec.finalizers change only through namespaces/finalize
// (ValidateNamespaceFinalizeUpdate). The kubernetes.io/metadata.name label always equals
// the name.
func NamespaceResource() registry.Resource {
	return registry.Resource{
		GVK:            v1.SchemeGroupVersion.WithKind("Namespace"),
		Plural:         "namespaces",
		Singular:       "namespace",
		ShortNames:     []string{"ns"},
		Namespaced:     false,
		New:            func() runtime.Object { return &v1.Namespace{} },
		NewList:        func() runtime.Object { return &v1.NamespaceList{} },
		NameValidation: apivalidation.NameIsDNSLabel,
		PrepareForCreate: registry.Hook(func(ns *v1.Namespace) {
			ns.Status = v1.NamespaceStatus{Phase: v1.NamespaceActive}
			for _, f := range ns.Spec.Finalizers {
				if f == v1.FinalizerKubernetes {
					return
				}
			}
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, v1.FinalizerKubernetes)
		}),
		PrepareForUpdate: registry.HookUpdate(func(ns, old *v1.Namespace) {
			ns.Spec.Finalizers = old.Spec.Finalizers
		}),
		Default: registry.Hook(nsDefault),
		Validate: registry.Func(func(ns *v1.Namespace) field.ErrorList {
			return nsValidateFinalizers(ns.Spec.Finalizers)
		}),
		ValidateUpdate: registry.FuncUpdate(func(ns, _ *v1.Namespace) field.ErrorList {
			return nsValidateFinalizers(ns.Spec.Finalizers)
		}),
		Status:   &registry.StatusStrategy{ValidateUpdate: registry.FuncUpdate(nsValidateStatusUpdate)},
		Handlers: NamespaceHandlers(),
		Delete:   NamespaceDeleteStrategy(),
		Columns:  nsColumns,
		Row: registry.FuncWith(func(ns *v1.Namespace, now time.Time) []interface{} {
			return []interface{}{ns.Name, string(ns.Status.Phase), registry.HumanAge(ns.CreationTimestamp, now)}
		}),
		Fields: registry.Func(func(ns *v1.Namespace) fields.Set {
			return fields.Set{"metadata.name": ns.Name, "status.phase": string(ns.Status.Phase)}
		}),
	}
}

// nsDefault sets the kubernetes.io/metadata.name label (on every write, so it cannot be
// changed or removed) and an empty phase to Active.
func nsDefault(ns *v1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[v1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = v1.NamespaceActive
	}
}

// ValidateNamespaceFinalizeUpdate checks a write to the namespaces/finalize subresource:
// every spec finalizer must be a qualified name, and one without a domain must be a
// standard one ("kubernetes"). Metadata is left to the generic handlers.
func ValidateNamespaceFinalizeUpdate(ns, old *v1.Namespace) field.ErrorList {
	if ns == nil || old == nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("namespace finalize: nil namespace"))}
	}
	return nsValidateFinalizers(ns.Spec.Finalizers)
}

func nsValidateFinalizers(finalizers []v1.FinalizerName) field.ErrorList {
	allErrs := field.ErrorList{}
	p := field.NewPath("spec", "finalizers")
	for i, f := range finalizers {
		name := string(f)
		allErrs = append(allErrs, apivalidation.ValidateFinalizerName(name, p.Index(i))...)
		if !strings.Contains(name, "/") && !nsStandardFinalizers.Has(name) {
			allErrs = append(allErrs, field.Invalid(p.Index(i), name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return allErrs
}

// nsValidateStatusUpdate: the phase is Active while the namespace lives and Terminating
// once it is being deleted.
func nsValidateStatusUpdate(ns, _ *v1.Namespace) field.ErrorList {
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != v1.NamespaceActive {
			return field.ErrorList{field.Invalid(field.NewPath("status", "Phase"), ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
		}
	} else if ns.Status.Phase != v1.NamespaceTerminating {
		return field.ErrorList{field.Invalid(field.NewPath("status", "Phase"), ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}
