package apiserver

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage"
)

// AdmitOp says whether an admitted write creates or updates an object.
type AdmitOp int

// The admitted operations. Deletes and connects reach only the Mutators and Validators
// that implement OperationFilter and say they handle them.
const (
	AdmitCreate AdmitOp = iota
	AdmitUpdate
	AdmitDelete
	AdmitConnect
)

// OperationFilter is implemented by a Mutator or Validator that also sees operations
// other than create and update (admission webhooks and policies see deletes); the
// others never see them, so that their Object is always the object to store.
type OperationFilter interface {
	HandlesOperation(op AdmitOp) bool
}

// handles reports whether the admission step sees op.
func handles(step any, op AdmitOp) bool {
	if op == AdmitCreate || op == AdmitUpdate {
		return true
	}
	f, ok := step.(OperationFilter)
	return ok && f.HandlesOperation(op)
}

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

// WarningMutator is implemented by a Mutator whose changes come with warnings for the
// client (admission webhooks and policies); mutate calls MutateWithWarnings instead of
// Mutate and passes the warnings on in the response's Warning headers.
type WarningMutator interface {
	MutateWithWarnings(ctx context.Context, req *AdmissionRequest) ([]string, error)
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
	// Object is the object to store (nil on deletes); OldObject the stored one on
	// updates and deletes, else nil.
	Object, OldObject runtime.Object
	DryRun            bool
	// Options are the request's options when the step needs them: *metav1.DeleteOptions
	// on deletes; nil on creates and updates.
	Options runtime.Object
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

// mutate runs the Mutators on a write of ns/name before its strategy runs and returns
// the warnings of those that give any.
func (s *Server) mutate(ctx context.Context, op AdmitOp, e *entry, sub, ns, name string, obj, old runtime.Object, dry bool) ([]string, error) {
	if len(s.cfg.Mutators) == 0 {
		return nil, nil
	}
	req := s.admissionRequest(op, e, sub, ns, name, obj, old, dry)
	var warnings []string
	for _, m := range s.cfg.Mutators {
		if wm, ok := m.(WarningMutator); ok {
			w, err := wm.MutateWithWarnings(ctx, req)
			if err != nil {
				return nil, err
			}
			warnings = append(warnings, w...)
			continue
		}
		if err := m.Mutate(ctx, req); err != nil {
			return nil, err
		}
	}
	return warnings, nil
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

// admitDelete runs the Mutators, then the Validators, that handle deletes on the
// deletion of obj (stored as ns/name), before anything is written.
func (s *Server) admitDelete(ctx context.Context, e *entry, ns, name string, obj runtime.Object, opts *metav1.DeleteOptions, dry bool) error {
	req := s.admissionRequest(AdmitDelete, e, "", ns, name, nil, obj, dry)
	req.Options = opts
	for _, m := range s.cfg.Mutators {
		if handles(m, AdmitDelete) {
			if err := m.Mutate(ctx, req); err != nil {
				return err
			}
		}
	}
	for _, v := range s.validators {
		if handles(v, AdmitDelete) {
			if _, err := v.Validate(ctx, req); err != nil {
				return err
			}
		}
	}
	return nil
}

// connectOptions build the options object a CONNECT of a subresource is admitted with,
// from the request's query and the path below the subresource, keyed by
// "resource/subresource" of the core group (those Kubernetes serves as connecters).
var connectOptions = map[string]func(q url.Values, path string) runtime.Object{
	"pods/attach": func(q url.Values, _ string) runtime.Object {
		return &corev1.PodAttachOptions{Container: q.Get("container"), Stdin: queryBool(q, "stdin"), Stdout: queryBool(q, "stdout"),
			Stderr: queryBool(q, "stderr"), TTY: queryBool(q, "tty")}
	},
	"pods/exec": func(q url.Values, _ string) runtime.Object {
		return &corev1.PodExecOptions{Container: q.Get("container"), Stdin: queryBool(q, "stdin"), Stdout: queryBool(q, "stdout"),
			Stderr: queryBool(q, "stderr"), TTY: queryBool(q, "tty"), Command: q["command"]}
	},
	"pods/portforward": func(q url.Values, _ string) runtime.Object {
		var ports []int32
		for _, p := range q["ports"] {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
				ports = append(ports, int32(n))
			}
		}
		return &corev1.PodPortForwardOptions{Ports: ports}
	},
	"pods/proxy":     func(_ url.Values, path string) runtime.Object { return &corev1.PodProxyOptions{Path: path} },
	"services/proxy": func(_ url.Values, path string) runtime.Object { return &corev1.ServiceProxyOptions{Path: path} },
	"nodes/proxy":    func(_ url.Values, path string) runtime.Object { return &corev1.NodeProxyOptions{Path: path} },
}

func queryBool(q url.Values, key string) bool {
	b, _ := strconv.ParseBool(q.Get(key))
	return b
}

// admitConnect runs the Mutators, then the Validators, that handle connects on a
// streaming or proxy request to ns/name's subresource sub (pods/attach, pods/exec,
// services/proxy, ...), before it is carried to its backend. The request's object is
// the subresource's options (PodAttachOptions, ...), as in Kubernetes.
func (s *Server) admitConnect(ctx context.Context, e *entry, sub, ns, name string, req *registry.HandlerRequest) error {
	build, ok := connectOptions[e.res.Plural+"/"+sub]
	if !ok || e.res.GVK.Group != "" {
		return nil
	}
	path := ""
	if _, rest, found := strings.Cut(req.Path, "/"+sub+"/"); found {
		path = "/" + rest
	}
	opts := build(req.Query, path)
	kind := corev1.SchemeGroupVersion.WithKind(reflect.TypeOf(opts).Elem().Name())
	areq := &AdmissionRequest{Operation: AdmitConnect, Resource: e.res.GVR(), Kind: kind, Subresource: sub,
		Namespace: ns, Name: name, Object: opts, Reader: s}
	for _, m := range s.cfg.Mutators {
		if handles(m, AdmitConnect) {
			if err := m.Mutate(ctx, areq); err != nil {
				return err
			}
		}
	}
	for _, v := range s.validators {
		if handles(v, AdmitConnect) {
			if _, err := v.Validate(ctx, areq); err != nil {
				return err
			}
		}
	}
	return nil
}
