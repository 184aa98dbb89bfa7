package networking

import (
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// maxLenIngressClassController bounds spec.controller.
const maxLenIngressClassController = 250

var supportedParameterScopes = []string{
	networkingv1.IngressClassParametersReferenceScopeCluster,
	networkingv1.IngressClassParametersReferenceScopeNamespace,
}

// IngressClassResource returns networking.k8s.io/v1 IngressClass: cluster-scoped, with a
// required, immutable spec.controller (a domain-prefixed path such as
// "k8s.io/ingress-nginx"), parameters.scope defaulted to Cluster, and the
// NAME CONTROLLER PARAMETERS AGE table.
func IngressClassResource() registry.Resource {
	return registry.Resource{
		GVK:            networkingv1.SchemeGroupVersion.WithKind("IngressClass"),
		Plural:         "ingressclasses",
		Singular:       "ingressclass",
		New:            func() runtime.Object { return &networkingv1.IngressClass{} },
		NewList:        func() runtime.Object { return &networkingv1.IngressClassList{} },
		Default:        defaultIngressClass,
		Validate:       registry.Func(ValidateIngressClass),
		ValidateUpdate: registry.FuncUpdate(ValidateIngressClassUpdate),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Controller", Type: "string", Description: "Controller that is responsible for handling this class"},
			{Name: "Parameters", Type: "string", Description: "A reference to a resource with additional parameters"},
			registry.AgeColumn,
		},
		Row: ingressClassRow,
	}
}

func asIngressClass(obj runtime.Object) *networkingv1.IngressClass {
	c, _ := obj.(*networkingv1.IngressClass)
	return c
}

func defaultIngressClass(obj runtime.Object) {
	c := asIngressClass(obj)
	if c == nil || c.Spec.Parameters == nil || c.Spec.Parameters.Scope != nil {
		return
	}
	c.Spec.Parameters.Scope = new(networkingv1.IngressClassParametersReferenceScopeCluster)
}

// ValidateIngressClass checks spec.controller and spec.parameters.
func ValidateIngressClass(c *networkingv1.IngressClass) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "controller")
	if c.Spec.Controller == "" {
		errs = append(errs, field.Required(p, ""))
	} else {
		if len(c.Spec.Controller) > maxLenIngressClassController {
			errs = append(errs, field.TooLong(p, "", maxLenIngressClassController))
		}
		errs = append(errs, validation.IsDomainPrefixedPath(p, c.Spec.Controller)...)
	}
	return append(errs, validateParameters(c.Spec.Parameters, field.NewPath("spec", "parameters"))...)
}

// ValidateIngressClassUpdate checks c like ValidateIngressClass and keeps spec.controller
// immutable.
func ValidateIngressClassUpdate(c, old *networkingv1.IngressClass) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	if old != nil {
		errs = apivalidation.ValidateImmutableField(c.Spec.Controller, old.Spec.Controller, field.NewPath("spec", "controller"))
	}
	return append(errs, ValidateIngressClass(c)...)
}

func validateParameters(params *networkingv1.IngressClassParametersReference, p *field.Path) field.ErrorList {
	if params == nil {
		return nil
	}
	errs := validateResourceRef(params.APIGroup, params.Kind, params.Name, p)
	if params.Scope == nil {
		return append(errs, field.Required(p.Child("scope"), ""))
	}
	switch scope := *params.Scope; scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil {
			errs = append(errs, field.Required(p.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range apivalidation.ValidateNamespaceName(*params.Namespace, false) {
				errs = append(errs, field.Invalid(p.Child("namespace"), *params.Namespace, msg))
			}
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			errs = append(errs, field.Forbidden(p.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("scope"), scope, supportedParameterScopes))
	}
	return errs
}

// ingressClassRow prints PARAMETERS as Kind[.apiGroup]/name, or "<none>".
func ingressClassRow(obj runtime.Object, now time.Time) []interface{} {
	c := asIngressClass(obj)
	if c == nil {
		return nil
	}
	params := "<none>"
	if p := c.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []interface{}{c.Name, c.Spec.Controller, params, registry.HumanAge(c.CreationTimestamp, now)}
}
