package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/tranche/tranche/internal/registry"
)

// routeTable is one snapshot of the served resources. It is never changed once
// published: adding or removing resources at run time builds a new table and swaps it
// in, so a request reads its routes with one atomic load and no lock.
type routeTable struct {
	entries []*entry
	byGVR   map[schema.GroupVersionResource]*entry
	// owned are the resources added at run time, by owner (a CustomResourceDefinition's
	// name).
	owned map[string]*dynamicSet
	// dynamic maps each resource added at run time to its set.
	dynamic map[schema.GroupVersionResource]*dynamicSet
}

// dynamicSet is the resources one owner added, with what their watch caches and
// server-side apply need.
type dynamicSet struct {
	entries []*entry
	// stop ends the storage watches of the set's caches.
	stop context.CancelFunc
	// tc types the objects for managedFields and server-side apply.
	tc managedfields.TypeConverter
	// refuseCreates, when set, is why creates are refused (RefuseCreates).
	refuseCreates atomic.Pointer[string]

	mu       sync.Mutex
	managers map[fieldManagerKey]*managedfields.FieldManager
}

// DynamicOptions are what resources added at run time need besides their
// registry.Resource.
type DynamicOptions struct {
	// TypeConverter types the objects for managedFields and server-side apply; nil
	// deduces types from the objects.
	TypeConverter managedfields.TypeConverter
	// UnknownFields lists, by group/version/resource, the fields of a decoded object its
	// schema does not know ("spec.foo"): fieldValidation=Strict refuses a create, update
	// or patch with any, Warn returns them as warnings, as kube-apiserver does for custom
	// resources. The object must not be changed.
	UnknownFields map[schema.GroupVersionResource]func(runtime.Object) []string
	// Convert, when set, converts an object of one of the resources between their
	// versions (a CustomResourceDefinition's conversion webhook): objects read in another
	// version than the served one are converted to it, objects written are converted to
	// the storage version. Nil rewrites apiVersion only (conversion strategy None).
	Convert func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error)
}

// SetResources serves res, replacing what owner served before (nothing the first
// time): the resources a CustomResourceDefinition defines, which arrive and change at
// run time. Objects are unstructured. A resource whose group, version and plural
// another owner or the built-in set already serves is refused. Watches of the replaced
// resources end (clients watch again and reach the new ones).
func (s *Server) SetResources(owner string, res []registry.Resource, opts DynamicOptions) error {
	s.dynamicMu.Lock()
	defer s.dynamicMu.Unlock()
	old := s.routes.Load()
	prev := old.owned[owner]
	nt := &routeTable{byGVR: make(map[schema.GroupVersionResource]*entry, len(old.byGVR)+len(res)),
		owned: map[string]*dynamicSet{}, dynamic: map[schema.GroupVersionResource]*dynamicSet{}}
	for _, e := range old.entries {
		if prev != nil && slices.Contains(prev.entries, e) {
			continue
		}
		nt.entries = append(nt.entries, e)
		nt.byGVR[e.res.GVR()] = e
	}
	for o, set := range old.owned {
		if o != owner {
			nt.owned[o] = set
			for _, e := range set.entries {
				nt.dynamic[e.res.GVR()] = set
			}
		}
	}
	tc := opts.TypeConverter
	if tc == nil {
		tc = managedfields.NewDeducedTypeConverter()
	}
	bg, stop := context.WithCancel(s.bg)
	set := &dynamicSet{stop: stop, tc: tc}
	for i := range res {
		r := &res[i]
		gvr := r.GVR()
		if _, dup := nt.byGVR[gvr]; dup {
			stop()
			return fmt.Errorf("apiserver: resource %s is already served", gvr)
		}
		rs := &resourceStore{s: s.cfg.Storage, res: r, gr: gvr.GroupResource(), storedGVR: gvr, newStored: r.New, convert: opts.Convert}
		if v := r.Storage; v != nil {
			rs.storedGVR = v.GVR
		}
		e := &entry{res: r, store: rs, unknownFields: opts.UnknownFields[gvr]}
		e.cache = newWatchCache(s, e)
		e.cache.bg = bg
		set.entries = append(set.entries, e)
		nt.entries = append(nt.entries, e)
		nt.byGVR[gvr] = e
		nt.dynamic[gvr] = set
	}
	for _, e := range set.entries {
		if v := e.res.Storage; v != nil {
			target := nt.byGVR[v.GVR]
			if target == nil {
				stop()
				return fmt.Errorf("apiserver: %s is stored as %s, which is not served", e.res.GVR(), v.GVR)
			}
			e.store.newStored = target.res.New
		}
	}
	if len(set.entries) > 0 {
		nt.owned[owner] = set
	} else {
		stop()
	}
	s.routes.Store(nt)
	if prev != nil {
		prev.stop()
	}
	return nil
}

// RemoveResources stops serving what owner added with SetResources; their watches end.
func (s *Server) RemoveResources(owner string) {
	_ = s.SetResources(owner, nil, DynamicOptions{})
}

// RefuseCreates makes creates of owner's resources fail with 405 and message why
// (a CustomResourceDefinition being deleted: its objects are still served, and their
// watches go on, while they are deleted); "" serves creates again.
func (s *Server) RefuseCreates(owner, why string) {
	s.dynamicMu.Lock()
	defer s.dynamicMu.Unlock()
	if set := s.routes.Load().owned[owner]; set != nil {
		if why == "" {
			set.refuseCreates.Store(nil)
		} else {
			set.refuseCreates.Store(&why)
		}
	}
}

// createRefused returns the error RefuseCreates asked for e, if any.
func (s *Server) createRefused(e *entry) error {
	set := s.routes.Load().dynamic[e.res.GVR()]
	if set == nil {
		return nil
	}
	if why := set.refuseCreates.Load(); why != nil {
		err := apierrors.NewMethodNotSupported(e.store.gr, "create")
		err.ErrStatus.Message = *why
		return err
	}
	return nil
}

// fieldManager returns the FieldManager of e's subresource sub, for a resource added at
// run time: its objects are unstructured, converted between versions by rewriting
// apiVersion (the served versions share one stored form).
func (d *dynamicSet) fieldManager(e *entry, sub string) (*managedfields.FieldManager, error) {
	key := fieldManagerKey{gvr: e.res.GVR(), sub: sub}
	d.mu.Lock()
	defer d.mu.Unlock()
	if fm, ok := d.managers[key]; ok {
		return fm, nil
	}
	gvk := e.res.GVK
	fm, err := managedfields.NewDefaultFieldManager(d.tc, unstructuredConvertor{}, unstructuredDefaulter{}, unstructuredCreater{},
		gvk, gvk.GroupVersion(), sub, resetFields(e, sub))
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager of %s: %w", key.gvr, err))
	}
	if d.managers == nil {
		d.managers = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	d.managers[key] = fm
	return fm, nil
}

// unstructuredConvertor converts unstructured objects between the versions of one
// resource by rewriting apiVersion, as conversion strategy None does.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, _ interface{}) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	kind := in.GetObjectKind().GroupVersionKind()
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{kind})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v", kind, gv)
	}
	out := in.DeepCopyObject()
	out.GetObjectKind().SetGroupVersionKind(target)
	return out, nil
}

func (unstructuredConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type unstructuredDefaulter struct{}

func (unstructuredDefaulter) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// copyUnstructuredField is copyField for objects without Go types: the field is the
// top-level key its JSON name gives ("Status" → "status"), removed when src lacks it.
func copyUnstructuredField(dst *unstructured.Unstructured, src runtime.Object, name string) error {
	s, ok := src.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("cannot copy %s from %T to %T", name, src, dst)
	}
	key := strings.ToLower(name[:1]) + name[1:]
	if v, ok := s.Object[key]; ok {
		dst.Object[key] = runtime.DeepCopyJSONValue(v)
	} else {
		delete(dst.Object, key)
	}
	return nil
}

// unstructuredSpecChanged is specChanged for objects without Go types: whether any
// top-level key but apiVersion, kind, metadata and status differs.
func unstructuredSpecChanged(a *unstructured.Unstructured, b runtime.Object) bool {
	u, ok := b.(*unstructured.Unstructured)
	if !ok {
		return true
	}
	strip := func(m map[string]interface{}) map[string]interface{} {
		out := make(map[string]interface{}, len(m))
		for k, v := range m {
			switch k {
			case "apiVersion", "kind", "metadata", "status":
				continue
			}
			out[k] = v
		}
		return out
	}
	return !equality.Semantic.DeepEqual(strip(a.Object), strip(u.Object))
}

// checkUnknownFields reports the fields of obj e's schema does not know as
// fieldValidation asks: a BadRequest worded as a strict decoding error (Strict), or
// warnings (Warn).
func checkUnknownFields(e *entry, obj runtime.Object, fv fieldValidation, warnings []string) ([]string, error) {
	if e.unknownFields == nil || fv == validationIgnore {
		return warnings, nil
	}
	paths := e.unknownFields(obj)
	if len(paths) == 0 {
		return warnings, nil
	}
	errs := make([]error, len(paths))
	for i, p := range paths {
		errs[i] = fmt.Errorf("unknown field %q", p)
	}
	if fv == validationStrict {
		gvk := e.res.GVK
		se := runtime.NewStrictDecodingError(errs)
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, se))
	}
	for _, err := range errs {
		warnings = append(warnings, err.Error())
	}
	return warnings, nil
}
