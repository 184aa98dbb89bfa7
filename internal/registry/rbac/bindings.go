package rbac

import (
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// bindingColumns is kubectl's binding table; the subject columns are -o wide only.
func bindingColumns(kind string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn,
		{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
		registry.AgeColumn,
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + kind},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + kind},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + kind},
	}
}

// RoleBindingResource returns rbac.authorization.k8s.io/v1 RoleBinding: namespaced,
// roleRef.apiGroup and subjects' apiGroup defaulted, roleRef immutable, and the
// NAME ROLE AGE (wide: USERS GROUPS SERVICEACCOUNTS) table.
func RoleBindingResource() registry.Resource {
	return registry.Resource{
		GVK:            rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
		Plural:         "rolebindings",
		Singular:       "rolebinding",
		Namespaced:     true,
		New:            func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList:        func() runtime.Object { return &rbacv1.RoleBindingList{} },
		NameValidation: ValidateName,
		Default: registry.Hook(func(b *rbacv1.RoleBinding) {
			defaultBinding(&b.RoleRef, b.Subjects)
		}),
		Validate: func(obj runtime.Object) field.ErrorList {
			if b := asRoleBinding(obj); b != nil {
				return validateBinding(&b.RoleRef, b.Subjects, true)
			}
			return nil
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			b, o := asRoleBinding(obj), asRoleBinding(old)
			if b == nil {
				return nil
			}
			errs := validateBinding(&b.RoleRef, b.Subjects, true)
			if o != nil {
				errs = append(errs, validateRoleRefUnchanged(b.RoleRef, o.RoleRef)...)
			}
			return errs
		},
		Columns: bindingColumns("roleBinding"),
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			if b := asRoleBinding(obj); b != nil {
				return bindingRow(&b.ObjectMeta, b.RoleRef, b.Subjects, now)
			}
			return nil
		},
	}
}

// ClusterRoleBindingResource returns rbac.authorization.k8s.io/v1 ClusterRoleBinding:
// cluster-scoped, bound only to ClusterRoles, ServiceAccount subjects need a namespace,
// roleRef immutable, and the NAME ROLE AGE (wide: USERS GROUPS SERVICEACCOUNTS) table.
func ClusterRoleBindingResource() registry.Resource {
	return registry.Resource{
		GVK:            rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"),
		Plural:         "clusterrolebindings",
		Singular:       "clusterrolebinding",
		New:            func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewList:        func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		NameValidation: ValidateName,
		Default: registry.Hook(func(b *rbacv1.ClusterRoleBinding) {
			defaultBinding(&b.RoleRef, b.Subjects)
		}),
		Validate: func(obj runtime.Object) field.ErrorList {
			if b := asClusterRoleBinding(obj); b != nil {
				return validateBinding(&b.RoleRef, b.Subjects, false)
			}
			return nil
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			b, o := asClusterRoleBinding(obj), asClusterRoleBinding(old)
			if b == nil {
				return nil
			}
			errs := validateBinding(&b.RoleRef, b.Subjects, false)
			if o != nil {
				errs = append(errs, validateRoleRefUnchanged(b.RoleRef, o.RoleRef)...)
			}
			return errs
		},
		Columns: bindingColumns("clusterRoleBinding"),
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			if b := asClusterRoleBinding(obj); b != nil {
				return bindingRow(&b.ObjectMeta, b.RoleRef, b.Subjects, now)
			}
			return nil
		},
	}
}

func asRoleBinding(obj runtime.Object) *rbacv1.RoleBinding {
	b, _ := obj.(*rbacv1.RoleBinding)
	return b
}

func asClusterRoleBinding(obj runtime.Object) *rbacv1.ClusterRoleBinding {
	b, _ := obj.(*rbacv1.ClusterRoleBinding)
	return b
}

// defaultBinding fills roleRef.apiGroup and each subject's apiGroup from its kind, as the
// v1 defaulters do: "" for ServiceAccounts, the RBAC group for Users and Groups.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// validateBinding checks roleRef and subjects; namespaced is false for
// ClusterRoleBindings, which may only bind ClusterRoles and need namespaced
// ServiceAccount subjects.
func validateBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	refPath := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range ValidateName(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	}
	for i := range subjects {
		errs = append(errs, validateSubject(&subjects[i], namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

func validateSubject(s *rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.Name == "" {
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, strings.ToLower(s.Kind)+" name cannot be empty"))
		}
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// validateRoleRefUnchanged keeps roleRef immutable: changing what a binding grants must be
// a delete and create, so nobody widens a binding they were only allowed to edit.
func validateRoleRefUnchanged(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref == old {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
}

// bindingRow prints ROLE as Kind/name and the subjects split by kind, ServiceAccounts as
// namespace/name, each list joined with ", ".
func bindingRow(meta *metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return []interface{}{
		meta.Name, ref.Kind + "/" + ref.Name, registry.HumanAge(meta.CreationTimestamp, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", "),
	}
}
