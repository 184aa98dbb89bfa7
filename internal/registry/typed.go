package registry

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Strategy is a resource's strategy written for its Go type T (*v1.Service): the
// hooks take T, and Apply adapts them once to the untyped hooks of Resource that the
// generic handlers call. An object of another type (a programmer error) makes a hook do
// nothing: hooks return no errors, no warnings, no row and no fields for it.
type Strategy[T runtime.Object] struct {
	PrepareForCreate func(obj T)
	PrepareForUpdate func(obj, old T)
	Default          func(obj T)
	Validate         func(obj T) field.ErrorList
	ValidateUpdate   func(obj, old T) field.ErrorList
	// Warnings gets the zero T (nil) as old on create.
	Warnings func(obj, old T) []string
	Row      func(obj T, now time.Time) []interface{}
	Fields   func(obj T) fields.Set
	// StatusPrepareForUpdate and StatusValidateUpdate make the status subresource's
	// strategy; Status is set when either is, or when HasStatus is.
	StatusPrepareForUpdate func(obj, old T)
	StatusValidateUpdate   func(obj, old T) field.ErrorList
	HasStatus              bool
}

// Apply sets r's hooks from s (those s leaves nil stay as they are) and returns r.
func (s Strategy[T]) Apply(r Resource) Resource {
	if s.PrepareForCreate != nil {
		r.PrepareForCreate = Hook(s.PrepareForCreate)
	}
	if s.PrepareForUpdate != nil {
		r.PrepareForUpdate = HookUpdate(s.PrepareForUpdate)
	}
	if s.Default != nil {
		r.Default = Hook(s.Default)
	}
	if s.Validate != nil {
		r.Validate = Func(s.Validate)
	}
	if s.ValidateUpdate != nil {
		r.ValidateUpdate = FuncUpdate(s.ValidateUpdate)
	}
	if s.Warnings != nil {
		r.Warnings = FuncUpdate(s.Warnings)
	}
	if s.Row != nil {
		r.Row = FuncWith(s.Row)
	}
	if s.Fields != nil {
		r.Fields = Func(s.Fields)
	}
	if s.HasStatus || s.StatusPrepareForUpdate != nil || s.StatusValidateUpdate != nil {
		st := &StatusStrategy{}
		if s.StatusPrepareForUpdate != nil {
			st.PrepareForUpdate = HookUpdate(s.StatusPrepareForUpdate)
		}
		if s.StatusValidateUpdate != nil {
			st.ValidateUpdate = FuncUpdate(s.StatusValidateUpdate)
		}
		r.Status = st
	}
	return r
}

// as returns obj as a T, and false for another type or a nil pointer: the one type
// assertion every typed hook goes through.
func as[T runtime.Object](obj runtime.Object) (T, bool) {
	var zero T
	t, ok := obj.(T)
	if !ok || any(t) == any(zero) {
		return zero, false
	}
	return t, true
}

// Hook adapts a hook on T to one on runtime.Object; another type is left alone.
func Hook[T runtime.Object](f func(T)) func(runtime.Object) {
	return func(obj runtime.Object) {
		if t, ok := as[T](obj); ok {
			f(t)
		}
	}
}

// HookUpdate adapts a hook on an object and the one it replaces.
func HookUpdate[T runtime.Object](f func(obj, old T)) func(obj, old runtime.Object) {
	return func(obj, old runtime.Object) {
		t, ok1 := as[T](obj)
		o, ok2 := as[T](old)
		if ok1 && ok2 {
			f(t, o)
		}
	}
}

// Func adapts a function of T; another type gets R's zero value.
func Func[T runtime.Object, R any](f func(T) R) func(runtime.Object) R {
	return func(obj runtime.Object) R {
		t, ok := as[T](obj)
		if !ok {
			var zero R
			return zero
		}
		return f(t)
	}
}

// FuncWith adapts a function of T and another argument.
func FuncWith[T runtime.Object, A, R any](f func(T, A) R) func(runtime.Object, A) R {
	return func(obj runtime.Object, a A) R {
		t, ok := as[T](obj)
		if !ok {
			var zero R
			return zero
		}
		return f(t, a)
	}
}

// FuncUpdate adapts a function of an object and the one it replaces; old may be nil
// (a create's warnings), which f gets as the zero T.
func FuncUpdate[T runtime.Object, R any](f func(obj, old T) R) func(obj, old runtime.Object) R {
	return func(obj, old runtime.Object) R {
		t, ok := as[T](obj)
		o, okOld := as[T](old)
		if !ok || (!okOld && old != nil) {
			var zero R
			return zero
		}
		return f(t, o)
	}
}

// Scale adapts typed replica accessors to a ScaleStrategy.
func Scale[T runtime.Object](get func(T) (specReplicas, statusReplicas int32, selector string), set func(T, int32)) *ScaleStrategy {
	return &ScaleStrategy{
		Get: func(obj runtime.Object) (int32, int32, string) {
			if t, ok := as[T](obj); ok {
				return get(t)
			}
			return 0, 0, ""
		},
		Set: func(obj runtime.Object, replicas int32) {
			if t, ok := as[T](obj); ok {
				set(t, replicas)
			}
		},
	}
}

// Mutate adapts a typed update step for Objects.Update.
func Mutate[T runtime.Object](f func(T) (T, error)) func(runtime.Object) (runtime.Object, error) {
	return func(obj runtime.Object) (runtime.Object, error) {
		t, ok := as[T](obj)
		if !ok {
			var want T
			return nil, apierrors.NewInternalError(fmt.Errorf("expected %T, got %T", want, obj))
		}
		return f(t)
	}
}

// SuccessStatus is the Status a subresource returns when it has no object to show.
func SuccessStatus() *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
}
