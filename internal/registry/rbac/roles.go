// Package rbac serves rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings.
// Names follow the path-segment rule rather than DNS rules, so "system:controller:x" is a
// valid name.
package rbac

import (
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// ValidateName is the name rule of every RBAC object and of roleRef.name: anything that
// can be one URL path segment (no "/", no "%", not "." or ".."). With prefix set it checks
// a generateName prefix.
func ValidateName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// createdAtColumns is the table the API server prints for resources without their own
// printer, which is what kubectl shows for roles and cluster roles.
var createdAtColumns = []metav1.TableColumnDefinition{
	registry.NameColumn,
	{Name: "Created At", Type: "date", Description: registry.AgeColumn.Description},
}

// createdAtRow formats creationTimestamp as RFC 3339 in UTC, as the default table does.
func createdAtRow(meta *metav1.ObjectMeta) []interface{} {
	return []interface{}{meta.Name, meta.CreationTimestamp.UTC().Format(time.RFC3339)}
}

// RoleResource returns rbac.authorization.k8s.io/v1 Role: namespaced, rules validated as
// Kubernetes does (no nonResourceURLs), and the NAME CREATED AT table.
func RoleResource() registry.Resource {
	return registry.Resource{
		GVK:            rbacv1.SchemeGroupVersion.WithKind("Role"),
		Plural:         "roles",
		Singular:       "role",
		Namespaced:     true,
		New:            func() runtime.Object { return &rbacv1.Role{} },
		NewList:        func() runtime.Object { return &rbacv1.RoleList{} },
		NameValidation: ValidateName,
		Validate:       registry.Func(ValidateRole),
		ValidateUpdate: registry.FuncUpdate(func(obj, _ *rbacv1.Role) field.ErrorList { return ValidateRole(obj) }),
		Columns:        createdAtColumns,
		Row: func(obj runtime.Object, _ time.Time) []interface{} {
			if r := asRole(obj); r != nil {
				return createdAtRow(&r.ObjectMeta)
			}
			return nil
		},
	}
}

// ClusterRoleResource returns rbac.authorization.k8s.io/v1 ClusterRole: cluster-scoped,
// rules may name nonResourceURLs, an aggregationRule needs selectors, and the
// NAME CREATED AT table.
func ClusterRoleResource() registry.Resource {
	return registry.Resource{
		GVK:            rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
		Plural:         "clusterroles",
		Singular:       "clusterrole",
		New:            func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewList:        func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		NameValidation: ValidateName,
		Validate:       registry.Func(ValidateClusterRole),
		ValidateUpdate: registry.FuncUpdate(func(obj, _ *rbacv1.ClusterRole) field.ErrorList { return ValidateClusterRole(obj) }),
		Columns:        createdAtColumns,
		Row: func(obj runtime.Object, _ time.Time) []interface{} {
			if r := asClusterRole(obj); r != nil {
				return createdAtRow(&r.ObjectMeta)
			}
			return nil
		},
	}
}

func asRole(obj runtime.Object) *rbacv1.Role {
	r, _ := obj.(*rbacv1.Role)
	return r
}

func asClusterRole(obj runtime.Object) *rbacv1.ClusterRole {
	r, _ := obj.(*rbacv1.ClusterRole)
	return r
}

// ValidateRole checks a Role's rules; namespaced rules cannot grant non-resource URLs.
func ValidateRole(r *rbacv1.Role) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range r.Rules {
		errs = append(errs, validatePolicyRule(&r.Rules[i], true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ValidateClusterRole checks a ClusterRole's rules and aggregation rule.
func ValidateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range r.Rules {
		errs = append(errs, validatePolicyRule(&r.Rules[i], false, field.NewPath("rules").Index(i))...)
	}
	if r.AggregationRule != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			errs = append(errs, metav1validation.ValidateLabelSelector(&r.AggregationRule.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
		}
	}
	return errs
}

// validatePolicyRule requires verbs; a rule is either about non-resource URLs (cluster
// roles only) or about resources, which then need API groups and resources, and resource
// names only with a single resource.
func validatePolicyRule(rule *rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	if len(rule.ResourceNames) > 0 && len(rule.Resources) > 1 {
		errs = append(errs, field.Required(p.Child("resourceNames"), "resource names cannot apply to multiple resources"))
	}
	return errs
}
