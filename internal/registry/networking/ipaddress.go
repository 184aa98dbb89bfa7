package networking

import (
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// IPAddressResource serves networking.k8s.io/v1 ipaddresses: cluster-scoped objects
// named by an IP address in canonical form, each with a required, immutable parentRef
// to what holds the address; the NAME PARENTREF table.
func IPAddressResource() registry.Resource {
	return registry.Strategy[*networkingv1.IPAddress]{
		Validate: func(ip *networkingv1.IPAddress) field.ErrorList {
			return validateParentReference(ip.Spec.ParentRef, field.NewPath("spec"))
		},
		ValidateUpdate: func(ip, old *networkingv1.IPAddress) field.ErrorList {
			return apivalidation.ValidateImmutableField(ip.Spec.ParentRef, old.Spec.ParentRef, field.NewPath("spec", "parentRef"))
		},
		Row: func(ip *networkingv1.IPAddress, _ time.Time) []interface{} {
			return []interface{}{ip.Name, parentRefString(ip.Spec.ParentRef)}
		},
	}.Apply(registry.Resource{
		GVK:            networkingv1.SchemeGroupVersion.WithKind("IPAddress"),
		Plural:         "ipaddresses",
		Singular:       "ipaddress",
		ShortNames:     []string{"ip"},
		New:            func() runtime.Object { return &networkingv1.IPAddress{} },
		NewList:        func() runtime.Object { return &networkingv1.IPAddressList{} },
		NameValidation: ValidateIPAddressName,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "ParentRef", Type: "string", Description: networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]},
		},
	})
}

// ValidateIPAddressName accepts an IP address in canonical form; an IPAddress cannot
// have a generated name, so prefix changes nothing.
func ValidateIPAddressName(name string, _ bool) []string {
	var msgs []string
	for _, e := range validation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, e.Detail)
	}
	return msgs
}

// validateParentReference requires a parentRef with a resource and a name; group (empty
// for core) must be a DNS subdomain, and resource, name and namespace path segments.
func validateParentReference(ref *networkingv1.ParentReference, fldPath *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(fldPath.Child("parentRef"), "")}
	}
	p := fldPath.Child("parentRef")
	var errs field.ErrorList
	if ref.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Group) {
			errs = append(errs, field.Invalid(p.Child("group"), ref.Group, msg))
		}
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{{"resource", ref.Resource, true}, {"name", ref.Name, true}, {"namespace", ref.Namespace, false}} {
		if f.value == "" {
			if f.required {
				errs = append(errs, field.Required(p.Child(f.name), ""))
			}
			continue
		}
		for _, msg := range content.IsPathSegmentName(f.value) {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, msg))
		}
	}
	return errs
}

// parentRefString prints a parentRef as kubectl's table does: resource.group[/namespace]/name.
func parentRefString(ref *networkingv1.ParentReference) string {
	if ref == nil {
		return "<none>"
	}
	s := strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
	if ref.Namespace != "" {
		s += "/" + ref.Namespace
	}
	return s + "/" + ref.Name
}
