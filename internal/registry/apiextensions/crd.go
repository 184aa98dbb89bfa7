// Package apiextensions serves apiextensions.k8s.io/v1 CustomResourceDefinition with
// kube-apiserver's own strategy and validation (k8s.io/apiextensions-apiserver), run on
// the internal type the v1 object converts to. Serving the resources a definition
// declares is internal/crd's work.
package apiextensions

import (
	"context"
	"fmt"
	"time"

	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdstrategy "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/tranche/tranche/internal/registry"
)

// The API server's codec decodes and encodes with client-go's scheme: it learns the v1
// types (with their defaulters) as it does every group's.
func init() {
	utilruntime.Must(apiextv1.AddToScheme(scheme.Scheme))
}

// Scheme converts between v1 and the internal type the upstream strategy works on.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiextinstall.Install(s)
	return s
}()

// CleanupFinalizer is the finalizer that holds a definition being deleted until its
// custom resources are gone.
const CleanupFinalizer = apiext.CustomResourceCleanupFinalizer

var (
	strategy       = crdstrategy.NewStrategy(Scheme)
	statusStrategy = crdstrategy.NewStatusStrategy(Scheme)
)

// ToInternal converts a v1 definition to the internal type.
func ToInternal(in *apiextv1.CustomResourceDefinition) (*apiext.CustomResourceDefinition, error) {
	out := &apiext.CustomResourceDefinition{}
	if err := Scheme.Convert(in, out, nil); err != nil {
		return nil, fmt.Errorf("customresourcedefinition %s: %w", in.Name, err)
	}
	return out, nil
}

func fromInternal(in *apiext.CustomResourceDefinition, out *apiextv1.CustomResourceDefinition) {
	tm := out.TypeMeta
	utilruntime.Must(Scheme.Convert(in, out, nil))
	out.TypeMeta = tm
}

// onInternal runs f on obj converted to the internal type and writes the result back.
func onInternal(obj runtime.Object, f func(*apiext.CustomResourceDefinition)) {
	crd, ok := obj.(*apiextv1.CustomResourceDefinition)
	if !ok {
		return
	}
	in, err := ToInternal(crd)
	if err != nil {
		return
	}
	f(in)
	fromInternal(in, crd)
}

func onInternal2(obj, old runtime.Object, f func(n, o *apiext.CustomResourceDefinition)) {
	crd, ok := obj.(*apiextv1.CustomResourceDefinition)
	oldCRD, ok2 := old.(*apiextv1.CustomResourceDefinition)
	if !ok || !ok2 {
		return
	}
	n, err := ToInternal(crd)
	if err != nil {
		return
	}
	o, err := ToInternal(oldCRD)
	if err != nil {
		return
	}
	f(n, o)
	fromInternal(n, crd)
}

func validateInternal(obj runtime.Object, f func(*apiext.CustomResourceDefinition) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	crd, ok := obj.(*apiextv1.CustomResourceDefinition)
	if !ok {
		return nil
	}
	in, err := ToInternal(crd)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	errs = f(in)
	return errs
}

func validateInternal2(obj, old runtime.Object, f func(n, o *apiext.CustomResourceDefinition) field.ErrorList) field.ErrorList {
	oldCRD, ok := old.(*apiextv1.CustomResourceDefinition)
	if !ok {
		return nil
	}
	o, err := ToInternal(oldCRD)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validateInternal(obj, func(n *apiext.CustomResourceDefinition) field.ErrorList { return f(n, o) })
}

// CustomResourceDefinitionResource returns apiextensions.k8s.io/v1
// CustomResourceDefinition: cluster-scoped, short name crd, category api-extensions,
// with a status subresource; kube-apiserver's defaulting, strategy (status cleared on
// create, storedVersions, generation) and validation; deleting one first marks it
// Terminating and adds the cleanup finalizer, which internal/crd removes once the
// custom resources are deleted.
func CustomResourceDefinitionResource() registry.Resource {
	ctx := context.Background()
	return registry.Resource{
		GVK:        apiextv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"),
		Plural:     "customresourcedefinitions",
		Singular:   "customresourcedefinition",
		ShortNames: []string{"crd", "crds"},
		Categories: []string{"api-extensions"},
		New:        func() runtime.Object { return &apiextv1.CustomResourceDefinition{} },
		NewList:    func() runtime.Object { return &apiextv1.CustomResourceDefinitionList{} },
		// The upstream strategy bumps metadata.generation on spec changes itself; the
		// handlers' tracking agrees with it.
		TrackGeneration: true,
		PrepareForCreate: func(obj runtime.Object) {
			onInternal(obj, func(c *apiext.CustomResourceDefinition) { strategy.PrepareForCreate(ctx, c) })
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			onInternal2(obj, old, func(n, o *apiext.CustomResourceDefinition) { strategy.PrepareForUpdate(ctx, n, o) })
		},
		Default: func(obj runtime.Object) { Scheme.Default(obj) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateInternal(obj, func(c *apiext.CustomResourceDefinition) field.ErrorList { return strategy.Validate(ctx, c) })
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateInternal2(obj, old, func(n, o *apiext.CustomResourceDefinition) field.ErrorList {
				return strategy.ValidateUpdate(ctx, n, o)
			})
		},
		Warnings: func(obj, old runtime.Object) []string {
			var out []string
			if old == nil {
				validateInternal(obj, func(c *apiext.CustomResourceDefinition) field.ErrorList {
					out = strategy.WarningsOnCreate(ctx, c)
					return nil
				})
				return out
			}
			validateInternal2(obj, old, func(n, o *apiext.CustomResourceDefinition) field.ErrorList {
				out = strategy.WarningsOnUpdate(ctx, n, o)
				return nil
			})
			return out
		},
		Status: &registry.StatusStrategy{
			PrepareForUpdate: func(obj, old runtime.Object) {
				onInternal2(obj, old, func(n, o *apiext.CustomResourceDefinition) { statusStrategy.PrepareForUpdate(ctx, n, o) })
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validateInternal2(obj, old, func(n, o *apiext.CustomResourceDefinition) field.ErrorList {
					return statusStrategy.ValidateUpdate(ctx, n, o)
				})
			},
		},
		Delete: &registry.DeleteStrategy{
			// The first deletion waits for the cleanup finalizer MarkDeleting adds.
			Finalizing: func(obj runtime.Object) bool {
				crd, ok := obj.(*apiextv1.CustomResourceDefinition)
				return ok && crd.DeletionTimestamp == nil
			},
			MarkDeleting: markDeleting,
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		},
		Row: func(obj runtime.Object, _ time.Time) []interface{} {
			crd, ok := obj.(*apiextv1.CustomResourceDefinition)
			if !ok {
				return nil
			}
			return []interface{}{crd.Name, crd.CreationTimestamp.UTC().Format(time.RFC3339)}
		},
	}
}

// markDeleting adds the cleanup finalizer and the Terminating condition, as
// kube-apiserver's CustomResourceDefinition storage does on the first deletion.
func markDeleting(obj runtime.Object) bool {
	crd, ok := obj.(*apiextv1.CustomResourceDefinition)
	if !ok {
		return false
	}
	changed := false
	if !hasFinalizer(crd.Finalizers, CleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, CleanupFinalizer)
		changed = true
	}
	if c := FindCondition(crd, apiextv1.Terminating); c == nil || c.Status != apiextv1.ConditionTrue {
		SetCondition(crd, apiextv1.CustomResourceDefinitionCondition{
			Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue, Reason: "InstanceDeletionPending",
			Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
		}, time.Now())
		changed = true
	}
	return changed
}

func hasFinalizer(fs []string, f string) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// FindCondition returns crd's condition of type t, or nil.
func FindCondition(crd *apiextv1.CustomResourceDefinition, t apiextv1.CustomResourceDefinitionConditionType) *apiextv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// SetCondition sets c on crd, keeping the last transition time when the status does
// not change, as upstream's SetCRDCondition does.
func SetCondition(crd *apiextv1.CustomResourceDefinition, c apiextv1.CustomResourceDefinitionCondition, now time.Time) {
	cur := FindCondition(crd, c.Type)
	if cur == nil {
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		crd.Status.Conditions = append(crd.Status.Conditions, c)
		return
	}
	if cur.Status != c.Status {
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	} else {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	*cur = c
}
