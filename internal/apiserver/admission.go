package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/storage"
)

// AdmitOp says whether an admitted write creates or updates an object.
type AdmitOp int

// The admitted operations.
const (
	AdmitCreate AdmitOp = iota
	AdmitUpdate
)

// Admitter checks or completes a write that needs more than the object itself (for
// example allocating a ClusterIP) and returns extra storage writes to commit atomically
// with it. It may mutate obj. gvr is the resource's "group/version, Resource=plural"
// string (schema.GroupVersionResource.String()). A create whose extra writes collide
// with a concurrent one (storage.KeyError with ErrExists on an Op key) is admitted
// again from the original object, so random choices can be retried.
type Admitter interface {
	Admit(ctx context.Context, op AdmitOp, gvr string, obj, old runtime.Object, dry bool) ([]storage.Op, error)
	// Release returns the writes that free what obj holds when it is deleted.
	Release(ctx context.Context, gvr string, obj runtime.Object) []storage.Op
}

func (s *Server) admit(ctx context.Context, op AdmitOp, e *entry, obj, old runtime.Object, dry bool) ([]storage.Op, error) {
	var ops []storage.Op
	for _, a := range s.admitters {
		more, err := a.Admit(ctx, op, e.res.GVR().String(), obj, old, dry)
		if err != nil {
			return nil, err
		}
		ops = append(ops, more...)
	}
	return ops, nil
}

func (s *Server) releaseOps(ctx context.Context, e *entry, obj runtime.Object) []storage.Op {
	var ops []storage.Op
	for _, a := range s.admitters {
		ops = append(ops, a.Release(ctx, e.res.GVR().String(), obj)...)
	}
	return ops
}

// Validator is a validating admission step, as Kubernetes' validating admission plugins
// (PodSecurity): it sees a create or update after defaulting, validation and the
// Admitters, also on dry runs, and either refuses it with an error the client receives
// as it is (an apierrors status error) or lets it through with warnings for the
// response's Warning headers. It must not change the request's objects.
type Validator interface {
	Validate(ctx context.Context, req *AdmissionRequest) (warnings []string, err error)
}

// Mutator is a mutating admission step, as Kubernetes' mutating admission plugins
// (DefaultTolerationSeconds): it sees a create or update of an object or of one of its
// subresources, also on dry runs, before the resource's strategy prepares, defaults and
// validates it, so what it adds is checked like the client's own fields. It may change
// req.Object and nothing else, or refuse the write with an error the client receives as
// it is.
type Mutator interface {
	Mutate(ctx context.Context, req *AdmissionRequest) error
}

// AdmissionRequest describes one write to a Mutator or a Validator.
type AdmissionRequest struct {
	Operation AdmitOp
	// Resource and Kind are the served resource and kind ({"", "v1", "pods"}, Pod).
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
	// Subresource is "status", "scale", "binding", ... or empty for the object itself.
	Subresource string
	// Namespace is empty for cluster-scoped resources; Name is the object's name (a
	// generated one already chosen).
	Namespace, Name string
	// Object is the object to store; OldObject the stored one on updates, else nil.
	Object, OldObject runtime.Object
	DryRun            bool
	// Reader reads other objects the decision depends on.
	Reader Reader
}

// Reader reads the API's objects for a Validator.
type Reader interface {
	// NamespaceLabels returns a namespace's labels (not to be changed), or a NotFound
	// error. It answers from the server's namespace cache, which has this server's own
	// writes and follows other servers' through a watch.
	NamespaceLabels(ctx context.Context, name string) (map[string]string, error)
	// List returns the objects of a served resource in namespace ns (every namespace
	// when ns is empty), read from storage.
	List(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]runtime.Object, error)
}

var _ Reader = (*Server)(nil)

// NamespaceLabels implements Reader.
func (s *Server) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	st, exists, err := s.namespaces.state(ctx, name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(s.lookup("", "v1", "namespaces").store.gr, name)
	}
	return st.labels, nil
}

// List implements Reader.
func (s *Server) List(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]runtime.Object, error) {
	e := s.routes.Load().byGVR[gvr]
	if e == nil {
		return nil, fmt.Errorf("resource %s is not served", gvr)
	}
	all := &filter{labels: labels.Everything(), fields: fields.Everything(), res: e.res}
	l, err := s.listStored(ctx, e, ns, all, 0, "", "", "", false)
	if err != nil {
		return nil, err
	}
	return l.items, nil
}

// admissionRequest describes a write of obj, named ns/name, to Mutators and Validators.
func (s *Server) admissionRequest(op AdmitOp, e *entry, sub, ns, name string, obj, old runtime.Object, dry bool) *AdmissionRequest {
	req := &AdmissionRequest{Operation: op, Resource: e.res.GVR(), Kind: e.res.GVK, Subresource: sub,
		Namespace: ns, Name: name, Object: obj, OldObject: old, DryRun: dry, Reader: s}
	if !e.res.Namespaced {
		req.Namespace = ""
	}
	return req
}

// mutate runs the Mutators on a write of ns/name before its strategy runs.
func (s *Server) mutate(ctx context.Context, op AdmitOp, e *entry, sub, ns, name string, obj, old runtime.Object, dry bool) error {
	if len(s.cfg.Mutators) == 0 {
		return nil
	}
	req := s.admissionRequest(op, e, sub, ns, name, obj, old, dry)
	for _, m := range s.cfg.Mutators {
		if err := m.Mutate(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

// validate runs the Validators on a write about to be stored and returns their warnings.
func (s *Server) validate(ctx context.Context, op AdmitOp, e *entry, sub string, obj, old runtime.Object, dry bool) ([]string, error) {
	if len(s.validators) == 0 {
		return nil, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	req := s.admissionRequest(op, e, sub, m.GetNamespace(), m.GetName(), obj, old, dry)
	var warnings []string
	for _, v := range s.validators {
		w, err := v.Validate(ctx, req)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	return warnings, nil
}
