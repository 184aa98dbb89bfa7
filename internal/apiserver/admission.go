package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

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

func validateQualifiedName(s string) []string { return validation.IsQualifiedName(s) }
