// Package authentication describes authentication.k8s.io/v1: TokenReview (does this
// token authenticate, and as whom?), SelfSubjectReview (who am I?) and the TokenRequest
// posted to a ServiceAccount's token subresource. Reviews are create-only and never
// stored; the API server answers them in the response's status.
package authentication

import (
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// Bounds on a requested token's lifetime.
const (
	// MinTokenExpirationSeconds is the shortest lifetime a TokenRequest may ask for.
	MinTokenExpirationSeconds = 10 * 60
	// MaxTokenExpirationSeconds is the longest (2^32 seconds).
	MaxTokenExpirationSeconds = 1 << 32
	// DefaultTokenExpirationSeconds is what an unset expirationSeconds means (one hour).
	DefaultTokenExpirationSeconds = 60 * 60
)

// boundKinds are the core/v1 kinds a token may be bound to: its lifetime then ends when
// that object is deleted.
var boundKinds = []string{"Node", "Pod", "Secret"}

// createOnly is the verb set of both reviews. Reviews have no list type; NewList returns
// the review type itself, as the OpenAPI builder needs a type and no list is ever served.
var createOnly = []string{"create"}

// TokenReviewResource returns TokenReview: cluster-scoped, create-only, spec.token
// required.
func TokenReviewResource() registry.Resource {
	return registry.Resource{
		GVK:      authenticationv1.SchemeGroupVersion.WithKind("TokenReview"),
		Plural:   "tokenreviews",
		Singular: "tokenreview",
		Verbs:    createOnly,
		New:      func() runtime.Object { return &authenticationv1.TokenReview{} },
		NewList:  func() runtime.Object { return &authenticationv1.TokenReview{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			tr, _ := obj.(*authenticationv1.TokenReview)
			if tr == nil || tr.Spec.Token != "" {
				return nil
			}
			return field.ErrorList{field.Required(field.NewPath("spec", "token"), "token is required for TokenReviewSpec")}
		},
	}
}

// SelfSubjectReviewResource returns SelfSubjectReview: cluster-scoped, create-only, with
// nothing to validate (the answer is the caller's own identity).
func SelfSubjectReviewResource() registry.Resource {
	return registry.Resource{
		GVK:      authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"),
		Plural:   "selfsubjectreviews",
		Singular: "selfsubjectreview",
		Verbs:    createOnly,
		New:      func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
		NewList:  func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
	}
}

// TokenRequestValidate checks a TokenRequest for the serviceaccounts/token subresource:
// expirationSeconds (unset means DefaultTokenExpirationSeconds) between 10 minutes and
// 2^32 seconds, and a boundObjectRef, when given, naming a core/v1 Node, Pod or Secret.
// Empty audiences are not an error: the API server fills in its own.
func TokenRequestValidate(tr *authenticationv1.TokenRequest) field.ErrorList {
	if tr == nil {
		return nil
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s := tr.Spec.ExpirationSeconds; s != nil {
		if *s < MinTokenExpirationSeconds {
			errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 10 minutes"))
		}
		if *s > MaxTokenExpirationSeconds {
			errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration larger than 2^32 seconds"))
		}
	}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		p := spec.Child("boundObjectRef")
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if gvk.Group != "" || !slices.Contains(boundKinds, gvk.Kind) {
			errs = append(errs, field.NotSupported(p.Child("kind"), gvk.GroupKind().String(), boundKinds))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
	}
	return errs
}
