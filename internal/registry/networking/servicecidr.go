package networking

import (
	"net/netip"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// ServiceCIDRResource serves networking.k8s.io/v1 servicecidrs: cluster-scoped ranges
// ClusterIPs may come from, one or two CIDRs (one per IP family) that never change
// except that a single-stack range may gain its other family; a status subresource whose
// Ready condition the servicecidr controller writes; the NAME CIDRS AGE table.
func ServiceCIDRResource() registry.Resource {
	return registry.Strategy[*networkingv1.ServiceCIDR]{
		PrepareForCreate: func(c *networkingv1.ServiceCIDR) { c.Status = networkingv1.ServiceCIDRStatus{} },
		Validate: func(c *networkingv1.ServiceCIDR) field.ErrorList {
			return validateServiceCIDRSpec(&c.Spec, field.NewPath("spec", "cidrs"))
		},
		ValidateUpdate: ValidateServiceCIDRUpdate,
		// Upstream checks nothing in a status write: its controller's Ready=True has no
		// reason, which metav1's condition rules would refuse.
		HasStatus: true,
		Row: func(c *networkingv1.ServiceCIDR, now time.Time) []interface{} {
			return []interface{}{c.Name, strings.Join(c.Spec.CIDRs, ","), registry.HumanAge(c.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:      networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR"),
		Plural:   "servicecidrs",
		Singular: "servicecidr",
		New:      func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		NewList:  func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "CIDRs", Type: "string", Description: networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]},
			registry.AgeColumn,
		},
	})
}

// validateServiceCIDRSpec is Kubernetes' check of spec.cidrs: one or two canonical
// CIDRs, two only when they are of different IP families.
func validateServiceCIDRSpec(spec *networkingv1.ServiceCIDRSpec, fldPath *field.Path) field.ErrorList {
	switch {
	case len(spec.CIDRs) == 0:
		return field.ErrorList{field.Required(fldPath, "at least one CIDR required")}
	case len(spec.CIDRs) > 2:
		return field.ErrorList{field.Invalid(fldPath, spec, "may only hold up to 2 values")}
	}
	var errs field.ErrorList
	for i, cidr := range spec.CIDRs {
		errs = append(errs, validation.IsValidCIDR(fldPath.Index(i), cidr)...)
	}
	if len(spec.CIDRs) == 2 {
		a, errA := netip.ParsePrefix(spec.CIDRs[0])
		b, errB := netip.ParsePrefix(spec.CIDRs[1])
		if errA == nil && errB == nil && a.Addr().Is4() == b.Addr().Is4() {
			errs = append(errs, field.Invalid(fldPath, spec.CIDRs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}

// ValidateServiceCIDRUpdate refuses changed CIDRs; the one change allowed is adding a
// second CIDR of the other family to a single-stack range (kubernetes#131261).
func ValidateServiceCIDRUpdate(c, old *networkingv1.ServiceCIDR) field.ErrorList {
	p := field.NewPath("spec", "cidrs")
	var errs field.ErrorList
	switch {
	case len(old.Spec.CIDRs) == len(c.Spec.CIDRs):
		for i, cidr := range old.Spec.CIDRs {
			if cidr != c.Spec.CIDRs[i] {
				errs = append(errs, field.Invalid(p.Index(i), c.Spec.CIDRs[i], apivalidation.FieldImmutableErrorMsg))
			}
		}
	case len(old.Spec.CIDRs) == 1 && len(c.Spec.CIDRs) == 2:
		if c.Spec.CIDRs[0] != old.Spec.CIDRs[0] {
			errs = append(errs, field.Invalid(p.Index(0), c.Spec.CIDRs[0], apivalidation.FieldImmutableErrorMsg))
		}
		errs = append(errs, validateServiceCIDRSpec(&c.Spec, p)...)
	default:
		errs = append(errs, field.Invalid(p, c.Spec.CIDRs, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}
