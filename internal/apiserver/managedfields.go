package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/tranche/tranche/internal/apiserver/openapi"
	"github.com/tranche/tranche/internal/registry"
)

// fieldManagers records managedFields on every write, as kube-apiserver does with
// k8s.io/apimachinery's managedfields: one FieldManager per resource and subresource,
// typing objects with the schemas the API server publishes. The zero value is ready; the
// type converter is built on the first write (it parses every schema, which costs more
// than start-up should wait for).
type fieldManagers struct {
	once sync.Once
	tc   managedfields.TypeConverter
	conv viewConvertor
	err  error

	mu       sync.Mutex
	managers map[fieldManagerKey]*managedfields.FieldManager
}

type fieldManagerKey struct {
	gvr schema.GroupVersionResource
	sub string
}

// trackedSubresources are those whose writes record a manager, each in entries of its
// own (scale writes as a manager of the object's spec.replicas with subresource scale,
// which is what kube-apiserver's scale handler maps them to); writes of the others
// (binding, finalize) keep the object's managedFields as they were.
var trackedSubresources = map[string]bool{"": true, "status": true, "scale": true}

// applySubresources are those server-side apply serves.
var applySubresources = map[string]bool{"": true, "status": true}

// fieldManager returns the FieldManager of e's subresource sub ("" for the object).
func (s *Server) fieldManager(e *entry, sub string) (*managedfields.FieldManager, error) {
	if d := s.routes.Load().dynamic[e.res.GVR()]; d != nil {
		return d.fieldManager(e, sub)
	}
	f := &s.fields
	f.once.Do(func() {
		defs, err := openapi.SchemaDefinitions(s.cfg.Resources)
		if err != nil {
			f.err = fmt.Errorf("server-side apply schemas: %w", err)
			return
		}
		f.tc, f.err = managedfields.NewTypeConverter(defs, false)
		f.conv = newViewConvertor(s.cfg.Resources)
	})
	if f.err != nil {
		return nil, apierrors.NewInternalError(f.err)
	}
	key := fieldManagerKey{gvr: e.res.GVR(), sub: sub}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.managers[key]; ok {
		return fm, nil
	}
	gvk := e.res.GVK
	fm, err := managedfields.NewDefaultFieldManager(f.tc, f.conv, scheme.Scheme, scheme.Scheme,
		gvk, gvk.GroupVersion(), sub, resetFields(e, sub))
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager of %s: %w", key.gvr, err))
	}
	if f.managers == nil {
		f.managers = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	f.managers[key] = fm
	return fm, nil
}

// viewConvertor is client-go's scheme with the conversions between a served version and
// the stored version it is a view of (registry.StorageView: autoscaling/v1 over v2
// HorizontalPodAutoscalers, events.k8s.io/v1 over core/v1 Events). The field manager
// converts an object to the version of each managedFields entry to update that entry's
// field set; the scheme knows every version's types but no conversion between them, and
// a write through one version of an object that a manager of the other had written lost
// its managedFields update ("unknown conversion").
type viewConvertor struct {
	runtime.ObjectConvertor
	views []storageView
}

// storageView is one served version over a stored one, by kind.
type storageView struct {
	served, stored schema.GroupVersionKind
	to, from       func(runtime.Object) runtime.Object
}

func newViewConvertor(resources []registry.Resource) viewConvertor {
	c := viewConvertor{ObjectConvertor: scheme.Scheme}
	kinds := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	for i := range resources {
		kinds[resources[i].GVR()] = resources[i].GVK
	}
	for i := range resources {
		r := &resources[i]
		if r.Storage == nil || r.Storage.GVR == r.GVR() {
			continue
		}
		stored, ok := kinds[r.Storage.GVR]
		if !ok {
			continue
		}
		c.views = append(c.views, storageView{served: r.GVK, stored: stored, to: r.Storage.ToStorage, from: r.Storage.FromStorage})
	}
	return c
}

// ConvertToVersion converts through the stored version when in or the target is a view
// of it, and otherwise as the scheme does.
func (c viewConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gv, ok := target.(schema.GroupVersion)
	from := in.GetObjectKind().GroupVersionKind()
	if !ok || from.GroupVersion() == gv {
		return c.ObjectConvertor.ConvertToVersion(in, target)
	}
	src, fromView := c.view(func(v storageView) bool { return v.served == from })
	stored := from
	if fromView {
		stored = src.stored
	}
	dst, toView := c.view(func(v storageView) bool { return v.stored == stored && v.served.GroupVersion() == gv })
	switch {
	case !fromView && !toView:
		return c.ObjectConvertor.ConvertToVersion(in, target)
	case !toView && stored.GroupVersion() != gv:
		return nil, fmt.Errorf("converting %s to %s: %s is kept as %s, which has no view in %s", from, gv, from.Kind, stored, gv)
	}
	// The typed form of in, in its own version (a copy the conversions may change).
	out, err := c.ObjectConvertor.ConvertToVersion(in, from.GroupVersion())
	if err != nil {
		return nil, err
	}
	kind := stored
	if fromView {
		out = src.to(out)
	}
	if toView {
		out, kind = dst.from(out), dst.served
	}
	out.GetObjectKind().SetGroupVersionKind(kind)
	return out, nil
}

func (c viewConvertor) view(match func(storageView) bool) (storageView, bool) {
	for _, v := range c.views {
		if match(v) {
			return v, true
		}
	}
	return storageView{}, false
}

// resetFields are the fields a write of sub leaves as they were, so that server-side
// apply neither gives them to the writer nor lets it set them: the status of an object
// write, the spec (and a few metadata fields, per resource) of a status write. These are
// the GetResetFields of kube-apiserver's strategies for the resources tranche serves.
func resetFields(e *entry, sub string) map[fieldpath.APIVersion]fieldpath.Filter {
	if e.res.Status == nil {
		return nil
	}
	paths := []fieldpath.Path{fieldpath.MakePathOrDie("status")}
	if sub == "status" {
		paths = []fieldpath.Path{fieldpath.MakePathOrDie("spec")}
		switch e.res.GVK.GroupKind() {
		case schema.GroupKind{Kind: "Pod"}:
			paths = append(paths, fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
				fieldpath.MakePathOrDie("metadata", "ownerReferences"))
		case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
			paths = append(paths, fieldpath.MakePathOrDie("metadata", "labels"))
		}
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(e.res.GVK.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(paths...)),
	}
}

// writeRequest is what a write's managed fields depend on in the request that made it.
type writeRequest struct {
	// group, resource and subresource are those the request names; a write the request
	// causes on anything else records no manager.
	group, resource, subresource string
	// fieldManager is the ?fieldManager= parameter, userAgent the User-Agent header: the
	// manager of an update is the first, or else the product part of the second.
	fieldManager, userAgent string
	// method is the HTTP method; force the ?force= parameter, nil when absent.
	method string
	force  *string
	// apply is set by server-side apply, whose FieldManager.Apply has already computed
	// the object's managedFields when it reaches the create or update path.
	apply bool
}

type writeRequestKey struct{}

// withWriteRequest returns r's context carrying what managed fields need of r, when r
// creates, updates or patches an object or its status. Other requests (a delete that
// sets deletionTimestamp, an eviction, a binding) change objects without recording a
// manager, as in Kubernetes.
func withWriteRequest(r *http.Request, ri *requestInfo) context.Context {
	switch {
	case ri == nil || !ri.IsResourceRequest || !trackedSubresources[ri.Subresource]:
		return r.Context()
	case ri.Verb == "create" && ri.Subresource == "", ri.Verb == "update", ri.Verb == "patch":
	default:
		return r.Context()
	}
	q := r.URL.Query()
	wr := &writeRequest{group: ri.APIGroup, resource: ri.Resource, subresource: ri.Subresource,
		fieldManager: q.Get("fieldManager"), userAgent: r.Header.Get("User-Agent"), method: r.Method}
	if f, ok := q["force"]; ok && len(f) > 0 {
		wr.force = &f[0]
	}
	return context.WithValue(r.Context(), writeRequestKey{}, wr)
}

// withApply marks ctx as a server-side apply.
func withApply(ctx context.Context) context.Context {
	wr := writeRequest{}
	if cur, ok := ctx.Value(writeRequestKey{}).(*writeRequest); ok {
		wr = *cur
	}
	wr.apply = true
	return context.WithValue(ctx, writeRequestKey{}, &wr)
}

// writeRequestOf returns the request that writes e's subresource sub and the subresource
// its manager is recorded under, or nil when the write is not the one a create, update or
// patch request asked for. A scale write updates the object itself (sub ""); its manager
// is recorded under scale.
func writeRequestOf(ctx context.Context, e *entry, sub string) (*writeRequest, string) {
	wr, _ := ctx.Value(writeRequestKey{}).(*writeRequest)
	if wr == nil || wr.group != e.res.GVK.Group || wr.resource != e.res.Plural {
		return nil, ""
	}
	if wr.subresource == "scale" && sub == "" {
		return wr, "scale"
	}
	if wr.subresource != sub {
		return nil, ""
	}
	return wr, sub
}

// manager names the writer, as kube-apiserver does: the fieldManager parameter, else the
// User-Agent up to its first "/" (kubectl, kube-controller-manager), printable characters
// only and at most 128 bytes.
func (wr *writeRequest) manager() string {
	if wr.fieldManager != "" {
		return wr.fieldManager
	}
	product, _, _ := strings.Cut(wr.userAgent, "/")
	var buf bytes.Buffer
	for _, r := range product {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > metavalidation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	return buf.String()
}

// validate rejects the write options kube-apiserver rejects (as its CreateOptions,
// UpdateOptions or PatchOptions validation does): a fieldManager too long or with
// unprintable characters, force on a patch that is not an apply.
func (wr *writeRequest) validate() error {
	var errs field.ErrorList
	kind := "UpdateOptions"
	switch wr.method {
	case http.MethodPost:
		kind = "CreateOptions"
	case http.MethodPatch:
		kind = "PatchOptions"
		if wr.force != nil && !wr.apply {
			errs = append(errs, field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch"))
		}
	}
	errs = append(errs, metavalidation.ValidateFieldManager(wr.fieldManager, field.NewPath("fieldManager"))...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return nil
}

// runCreateStrategyTracked runs e's create strategy on obj, then records the creator as
// the manager of every field the object has (defaults included, as kube-apiserver, which
// defaults before its field manager runs). managedFields the client sent are kept when
// valid, as kube-apiserver keeps them.
func (s *Server) runCreateStrategyTracked(ctx context.Context, e *entry, obj runtime.Object) error {
	if err := s.runCreateStrategy(e, obj); err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	wr, _ := writeRequestOf(ctx, e, "")
	switch {
	case wr == nil:
		// A write of the server's own, not a client's: nobody to record.
		m.SetManagedFields(nil)
		return nil
	case wr.apply:
		return nil
	}
	if err := wr.validate(); err != nil {
		return err
	}
	fm, err := s.fieldManager(e, "")
	if err != nil {
		return err
	}
	live := e.res.New()
	live.GetObjectKind().SetGroupVersionKind(e.res.GVK)
	return recordUpdate(fm, e, live, obj, wr.manager())
}

// prepareUpdateTracked is prepareUpdate followed by recording the writer as the manager of
// the fields it changed. The managedFields of the request object (a PUT body's, a patch's
// result) are taken before prepareUpdate restores the stored ones, so that a client can
// rewrite them as kube-apiserver lets it (kubectl does when it moves fields from
// client-side to server-side apply); a subresource write cannot.
func (s *Server) prepareUpdateTracked(ctx context.Context, e *entry, obj, current runtime.Object, sub string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	requested := m.GetManagedFields()
	if err := s.prepareUpdate(e, obj, current, sub); err != nil {
		return err
	}
	wr, sub := writeRequestOf(ctx, e, sub)
	if wr == nil {
		return nil
	}
	m, _ = meta.Accessor(obj) // prepareUpdate may have replaced the object's contents
	if wr.apply {
		m.SetManagedFields(requested)
		return nil
	}
	if err := wr.validate(); err != nil {
		return err
	}
	m.SetManagedFields(requested)
	fm, err := s.fieldManager(e, sub)
	if err != nil {
		return err
	}
	return recordUpdate(fm, e, current, obj, wr.manager())
}

// recordUpdate sets obj's managedFields to those of an update of live into obj by
// manager. Like kube-apiserver (UpdateNoErrors) it never fails the write for managed
// fields: on an error the managedFields are reset and the write proceeds.
func recordUpdate(fm *managedfields.FieldManager, e *entry, live, obj runtime.Object, manager string) error {
	live.GetObjectKind().SetGroupVersionKind(e.res.GVK)
	obj.GetObjectKind().SetGroupVersionKind(e.res.GVK)
	out := fm.UpdateNoErrors(live, obj, manager)
	om, err := meta.Accessor(out)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	m, _ := meta.Accessor(obj)
	m.SetManagedFields(om.GetManagedFields())
	return nil
}
