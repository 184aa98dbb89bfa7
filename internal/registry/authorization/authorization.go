// Package authorization describes authorization.k8s.io/v1: the access reviews behind
// "kubectl auth can-i" and webhook authorizers. They are create-only and never stored: the
// API server answers them in the response's status.
package authorization

import (
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// createOnly is the verb set of every review: it is posted and answered, nothing else.
// Reviews have no list type; NewList returns the review type itself, as the OpenAPI
// builder needs a type and no list is ever served.
var createOnly = []string{"create"}

// SelfSubjectAccessReviewResource returns SelfSubjectAccessReview ("can I do this?"):
// cluster-scoped, create-only, exactly one of resourceAttributes or nonResourceAttributes.
func SelfSubjectAccessReviewResource() registry.Resource {
	return registry.Resource{
		GVK:      authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"),
		Plural:   "selfsubjectaccessreviews",
		Singular: "selfsubjectaccessreview",
		Verbs:    createOnly,
		New:      func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
		NewList:  func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			r, _ := obj.(*authorizationv1.SelfSubjectAccessReview)
			if r == nil {
				return nil
			}
			errs := validateAttributes(r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
			return append(errs, validateEmptyMeta(r.ObjectMeta, false)...)
		},
	}
}

// SelfSubjectRulesReviewResource returns SelfSubjectRulesReview ("what may I do in this
// namespace?"): cluster-scoped and create-only; spec.namespace is checked by the handler
// that answers it, as Kubernetes refuses a missing one as a bad request.
func SelfSubjectRulesReviewResource() registry.Resource {
	return registry.Resource{
		GVK:      authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"),
		Plural:   "selfsubjectrulesreviews",
		Singular: "selfsubjectrulesreview",
		Verbs:    createOnly,
		New:      func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
		NewList:  func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
	}
}

// SubjectAccessReviewResource returns SubjectAccessReview ("may this user do this?"):
// cluster-scoped, create-only, exactly one kind of attributes and a user or groups.
func SubjectAccessReviewResource() registry.Resource {
	return registry.Resource{
		GVK:      authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"),
		Plural:   "subjectaccessreviews",
		Singular: "subjectaccessreview",
		Verbs:    createOnly,
		New:      func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
		NewList:  func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			r, _ := obj.(*authorizationv1.SubjectAccessReview)
			if r == nil {
				return nil
			}
			errs := validateSubjectAccessReviewSpec(&r.Spec)
			return append(errs, validateEmptyMeta(r.ObjectMeta, false)...)
		},
	}
}

// LocalSubjectAccessReviewResource returns LocalSubjectAccessReview: a SubjectAccessReview
// confined to one namespace (namespaced, create-only); resourceAttributes.namespace must
// be that namespace and non-resource requests are refused.
func LocalSubjectAccessReviewResource() registry.Resource {
	return registry.Resource{
		GVK:        authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview"),
		Plural:     "localsubjectaccessreviews",
		Singular:   "localsubjectaccessreview",
		Namespaced: true,
		Verbs:      createOnly,
		New:        func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
		NewList:    func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			r, _ := obj.(*authorizationv1.LocalSubjectAccessReview)
			if r == nil {
				return nil
			}
			errs := validateSubjectAccessReviewSpec(&r.Spec)
			errs = append(errs, validateEmptyMeta(r.ObjectMeta, true)...)
			if ra := r.Spec.ResourceAttributes; ra != nil && ra.Namespace != r.Namespace {
				errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), ra.Namespace, "must match metadata.namespace"))
			}
			if r.Spec.NonResourceAttributes != nil {
				errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), r.Spec.NonResourceAttributes, "disallowed on this kind of request"))
			}
			return errs
		},
	}
}

func validateSubjectAccessReviewSpec(spec *authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

// validateAttributes requires exactly one of the two attribute kinds and checks the
// selectors of resource attributes.
func validateAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), nra, "cannot be specified in combination with resourceAttributes"))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes"), nra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if ra == nil {
		return errs
	}
	p := spec.Child("resourceAttributes")
	// Unknown operators are accepted so that newer clients can still ask.
	if fs := ra.FieldSelector; fs != nil {
		fp := p.Child("fieldSelector")
		errs = append(errs, validateSelectorForm(fs.RawSelector, len(fs.Requirements), fp)...)
		for i, req := range fs.Requirements {
			errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(req,
				metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}, fp.Child("requirements").Index(i))...)
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		lp := p.Child("labelSelector")
		errs = append(errs, validateSelectorForm(ls.RawSelector, len(ls.Requirements), lp)...)
		for i, req := range ls.Requirements {
			errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(req,
				metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}, lp.Child("requirements").Index(i))...)
		}
	}
	return errs
}

// validateSelectorForm requires exactly one of a raw selector or requirements.
func validateSelectorForm(raw string, requirements int, p *field.Path) field.ErrorList {
	switch {
	case raw != "" && requirements > 0:
		return field.ErrorList{field.Invalid(p.Child("rawSelector"), raw, "may not specified at the same time as requirements")}
	case raw == "" && requirements == 0:
		return field.ErrorList{field.Required(p.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", p))}
	}
	return nil
}

// validateEmptyMeta refuses metadata on a review, which is never stored; namespaced allows
// metadata.namespace. Fields the API handlers fill in themselves are not the client's doing
// and are ignored.
func validateEmptyMeta(meta metav1.ObjectMeta, namespaced bool) field.ErrorList {
	m := meta
	m.ManagedFields = nil
	m.UID, m.ResourceVersion, m.Generation, m.CreationTimestamp = "", "", 0, metav1.Time{}
	msg := "must be empty"
	if namespaced {
		m.Namespace = ""
		msg = "must be empty except for namespace"
	}
	if apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, m) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata"), meta, msg)}
}
