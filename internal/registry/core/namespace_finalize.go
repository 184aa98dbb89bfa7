package core

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// NamespaceHandlers are the namespace subresources served by the namespace's own code:
// namespaces/finalize.
func NamespaceHandlers() []registry.Handler {
	return []registry.Handler{{Name: "finalize", Verbs: []string{"update"}, OwnsValidation: true, Serve: nsFinalize}}
}

// NamespaceDeleteStrategy keeps a namespace until its spec.finalizers are gone (the
// namespace controller empties it, then finalizes it) and turns it Terminating when it
// is marked for deletion.
func NamespaceDeleteStrategy() *registry.DeleteStrategy {
	return &registry.DeleteStrategy{
		Finalizing: registry.Func(func(ns *v1.Namespace) bool { return len(ns.Spec.Finalizers) > 0 }),
		MarkDeleting: registry.Func(func(ns *v1.Namespace) bool {
			if ns.Status.Phase == v1.NamespaceTerminating {
				return false
			}
			ns.Status.Phase = v1.NamespaceTerminating
			return true
		}),
	}
}

// nsFinalize serves PUT namespaces/NAME/finalize: only spec.finalizers change, and each
// must be a qualified name.
func nsFinalize(ctx context.Context, req *registry.HandlerRequest) (runtime.Object, int, error) {
	in := &v1.Namespace{}
	if err := req.Body.Decode(in, v1.SchemeGroupVersion.WithKind("Namespace"), registry.DecodeOptions{Strict: true}); err != nil {
		return nil, 0, err
	}
	var errs field.ErrorList
	for i, f := range in.Spec.Finalizers {
		for _, msg := range validation.IsQualifiedName(string(f)) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "finalizers").Index(i), f, msg))
		}
	}
	if len(errs) > 0 {
		return nil, 0, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("Namespace").GroupKind(), req.Name, errs)
	}
	return req.Objects.Update(ctx, "", req.Name, req.Subresource, false, registry.Mutate(func(ns *v1.Namespace) (*v1.Namespace, error) {
		ns.Spec.Finalizers = in.Spec.Finalizers
		ns.ResourceVersion = in.ResourceVersion
		return ns, nil
	}))
}
