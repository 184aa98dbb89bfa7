package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage"
)

// maxBodyBytes bounds request bodies as Kubernetes does (3 MiB objects plus slack).
const maxBodyBytes = 3 * 1024 * 1024

// entry is one served resource with its store.
type entry struct {
	res   *registry.Resource
	store *resourceStore
	// cache serves the resource's watches.
	cache *watchCache
	// unknownFields lists the fields of a decoded object its schema does not know, for
	// resources added at run time (dynamic.go); nil for the others.
	unknownFields func(runtime.Object) []string
}

func (e *entry) gr() string { return e.store.gr.String() }

func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError("limit is 3145728")
	}
	return data, nil
}

// readWriteBody reads a write's ?fieldValidation and body, the first two things every
// create, update, patch and apply needs.
func readWriteBody(r *http.Request) (fieldValidation, []byte, error) {
	fv, err := parseFieldValidation(r.URL.Query().Get("fieldValidation"))
	if err != nil {
		return "", nil, err
	}
	body, err := readBody(r)
	return fv, body, err
}

func isDryRun(r *http.Request) (bool, error) {
	for _, v := range r.URL.Query()["dryRun"] {
		if v != "All" {
			return false, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q: supported values: \"All\"", v))
		}
		return true, nil
	}
	return false, nil
}

// decodeBody reads and decodes a create/update body into a new object of e.
func (s *Server) decodeBody(r *http.Request, e *entry) (runtime.Object, []string, error) {
	fv, body, err := readWriteBody(r)
	if err != nil {
		return nil, nil, err
	}
	obj := e.res.New()
	warnings, err := decodeRequest(r.Header.Get("Content-Type"), body, obj, e.res.GVK, fv)
	if err == nil {
		warnings, err = checkUnknownFields(e, obj, fv, warnings)
	}
	return obj, warnings, err
}

// create handles POST on a collection.
func (s *Server) create(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	obj, warnings, err := s.decodeBody(r, e)
	if err != nil {
		return err
	}
	dry, err := isDryRun(r)
	if err != nil {
		return err
	}
	out, moreWarnings, err := s.createObject(ctx, e, ri.Namespace, obj, dry)
	if err != nil {
		return err
	}
	addWarnings(w, append(warnings, moreWarnings...))
	writeObject(w, r, http.StatusCreated, out)
	return nil
}

// createObject runs the create strategy on obj and stores it.
func (s *Server) createObject(ctx context.Context, e *entry, ns string, obj runtime.Object, dry bool) (runtime.Object, []string, error) {
	res := e.res
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	if res.Namespaced {
		if m.GetNamespace() != "" && ns != "" && m.GetNamespace() != ns {
			return nil, nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if ns == "" {
			ns = m.GetNamespace()
		}
		m.SetNamespace(ns)
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + utilrand.String(5))
	}
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.NewTime(s.now().Truncate(time.Second)))
	m.SetResourceVersion("")
	m.SetSelfLink("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	if res.TrackGeneration {
		m.SetGeneration(1)
	} else {
		m.SetGeneration(0)
	}
	warnings, err := s.mutate(ctx, AdmitCreate, e, "", m.GetNamespace(), m.GetName(), obj, nil, dry)
	if err != nil {
		return nil, nil, err
	}
	if err := s.runCreateStrategyTracked(ctx, e, obj); err != nil {
		return nil, nil, err
	}
	if res.Warnings != nil {
		warnings = append(warnings, safeWarnings(res, obj, nil)...)
	}
	if res.Namespaced {
		if err := s.checkNamespaceOpen(ctx, ns, res); err != nil {
			return nil, nil, err
		}
	}
	key := e.store.key(ns, m.GetName())
	orig := obj.DeepCopyObject()
	for attempt := 0; ; attempt++ {
		ops, err := s.admit(ctx, AdmitCreate, e, obj, nil, dry)
		if err != nil {
			return nil, nil, err
		}
		more, err := s.validate(ctx, AdmitCreate, e, "", obj, nil, dry)
		if err != nil {
			return nil, nil, err
		}
		warnings := append(slices.Clip(warnings), more...)
		if dry {
			return obj, warnings, nil
		}
		data, err := e.store.encode(obj)
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		rev, err := s.cfg.Storage.Create(ctx, key, data, ops...)
		var ke *storage.KeyError
		if err != nil && len(ops) > 0 && errors.As(err, &ke) && ke.Key != key && errors.Is(err, storage.ErrExists) && attempt < 8 {
			// A concurrent create took what admission chose; choose again.
			obj = orig.DeepCopyObject()
			m, _ = meta.Accessor(obj)
			continue
		}
		if err != nil {
			return nil, nil, s.admissionConflict(e, err, m.GetName())
		}
		m.SetResourceVersion(strconv.FormatInt(rev, 10))
		obj.GetObjectKind().SetGroupVersionKind(res.GVK)
		s.observeWrite(e, m.GetName(), obj, rev)
		return obj, warnings, nil
	}
}

// admissionConflict turns a collision on an admission key into the admitters' own
// error when one of them explains it, else into the generic storage error.
func (s *Server) admissionConflict(e *entry, err error, name string) error {
	var ke *storage.KeyError
	if errors.As(err, &ke) {
		for _, a := range s.admitters {
			if ex, ok := a.(interface {
				ExplainConflict(gvr, key, name string) error
			}); ok {
				if out := ex.ExplainConflict(e.res.GVR().String(), ke.Key, name); out != nil {
					return out
				}
			}
		}
	}
	return e.store.apiError(err, name)
}

// runCreateStrategy prepares, defaults and validates a new object.
func (s *Server) runCreateStrategy(e *entry, obj runtime.Object) (err error) {
	res := e.res
	defer recoverHook(res, &err)
	if res.PrepareForCreate != nil {
		res.PrepareForCreate(obj)
	}
	if res.Default != nil {
		res.Default(obj)
	}
	m, _ := meta.Accessor(obj)
	nameFn := res.NameValidation
	if nameFn == nil {
		nameFn = apivalidation.NameIsDNSSubdomain
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.Namespaced, nameFn, field.NewPath("metadata"))
	if res.Validate != nil {
		errs = append(errs, res.Validate(obj)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(res.GVK.GroupKind(), m.GetName(), errs)
	}
	return nil
}

// runUpdateStrategy prepares, defaults and validates obj replacing old.
func (s *Server) runUpdateStrategy(e *entry, obj, old runtime.Object, status bool, part *registry.SubresourceStrategy) (err error) {
	res := e.res
	defer recoverHook(res, &err)
	var errs field.ErrorList
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	switch {
	case part != nil:
		if part.PrepareForUpdate != nil {
			part.PrepareForUpdate(obj, old)
		}
		if res.Default != nil {
			res.Default(obj)
		}
		errs = apivalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))
		if part.ValidateUpdate != nil {
			errs = append(errs, part.ValidateUpdate(obj, old)...)
		}
	case status:
		if res.Status.PrepareForUpdate != nil {
			res.Status.PrepareForUpdate(obj, old)
		}
		errs = apivalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))
		if res.Status.ValidateUpdate != nil {
			errs = append(errs, res.Status.ValidateUpdate(obj, old)...)
		}
	default:
		if res.PrepareForUpdate != nil {
			res.PrepareForUpdate(obj, old)
		}
		if res.Default != nil {
			res.Default(obj)
		}
		errs = apivalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))
		if res.ValidateUpdate != nil {
			errs = append(errs, res.ValidateUpdate(obj, old)...)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(res.GVK.GroupKind(), m.GetName(), errs)
	}
	return nil
}

// recoverHook turns a panicking strategy hook into a 500 instead of a dead server.
func recoverHook(res *registry.Resource, err *error) {
	if p := recover(); p != nil {
		*err = apierrors.NewInternalError(fmt.Errorf("%s strategy failed: %v", res.Plural, p))
	}
}

func safeWarnings(res *registry.Resource, obj, old runtime.Object) (w []string) {
	defer func() {
		if recover() != nil {
			w = nil
		}
	}()
	return res.Warnings(obj, old)
}

// get handles GET of one object.
func (s *Server) get(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	rv := r.URL.Query().Get("resourceVersion")
	if err := s.waitForRequestedRevision(ctx, rv); err != nil {
		return err
	}
	obj, _, err := e.store.get(anyStateRead(ctx, rv), ri.Namespace, ri.Name)
	if err != nil {
		return err
	}
	return s.writeMaybeTable(w, r, e, obj)
}

// continueToken is the opaque state of a paged list.
type continueToken struct {
	APIVersion string `json:"v"`
	Revision   int64  `json:"rv"`
	Start      string `json:"start"`
}

func encodeContinue(rev int64, start string) string {
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", Revision: rev, Start: start})
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(s string) (*continueToken, error) {
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	var t continueToken
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, err
	}
	if t.APIVersion != "meta.k8s.io/v1" || (t.Revision <= 0 && t.Revision != latestRevision) || strings.Contains(t.Start, "..") {
		return nil, errors.New("unsupported continue token")
	}
	return &t, nil
}

// listObjects reads a (possibly paged) list and returns the items, the list revision and
// the continue token for the next page.
func (s *Server) listObjects(ctx context.Context, e *entry, ns string, f *filter, limit int64, cont string, rv string, rvMatch string) ([]runtime.Object, int64, string, *int64, error) {
	l, err := s.listStored(ctx, e, ns, f, limit, cont, rv, rvMatch, false)
	if err != nil {
		return nil, 0, "", nil, err
	}
	return l.items, l.rev, l.cont, l.remaining, nil
}

// listing is one list response's content.
type listing struct {
	// items are the decoded objects; raw the stored values instead, when asked for.
	items []runtime.Object
	raw   []storage.KeyValue
	rev   int64
	cont  string
	// remaining counts the items after this page, when known.
	remaining *int64
}

func (l *listing) len() int64 { return int64(len(l.items) + len(l.raw)) }

// listStored reads a (possibly paged) list. With raw (only for a filter that selects
// everything) the stored values are returned undecoded.
func (s *Server) listStored(ctx context.Context, e *entry, ns string, f *filter, limit int64, cont string, rv string, rvMatch string, raw bool) (*listing, error) {
	prefix := e.store.prefix(ns)
	opts := storage.ListOptions{}
	if cont == "" {
		if err := s.waitForRequestedRevision(ctx, rv); err != nil {
			return nil, err
		}
		ctx = anyStateRead(ctx, rv)
	}
	if cont != "" {
		if rv != "" && rv != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		t, err := decodeContinue(cont)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		opts.Revision = max(t.Revision, 0) // latestRevision: the newest
		opts.StartKey = prefix + t.Start
	} else if rvMatch == "Exact" {
		n, err := strconv.ParseInt(rv, 10, 64)
		if err != nil || n <= 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
		}
		opts.Revision = n
	}
	l := &listing{}
	for {
		if limit > 0 {
			opts.Limit = limit - l.len()
			if !f.everything() && opts.Limit < 64 {
				opts.Limit = 64
			}
		}
		page, err := s.cfg.Storage.List(ctx, prefix, opts)
		if err != nil {
			if errors.Is(err, storage.ErrCompacted) {
				if cont != "" {
					return nil, continueCompacted(cont)
				}
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s", rv))
			}
			return nil, apierrors.NewInternalError(err)
		}
		l.rev = page.Revision
		opts.Revision = l.rev
		for i, kv := range page.Items {
			if raw {
				l.raw = append(l.raw, kv)
			} else {
				obj, err := e.store.decode(kv.Value, kv.ModRevision)
				if err != nil {
					return nil, apierrors.NewInternalError(err)
				}
				if !f.matches(obj) {
					continue
				}
				l.items = append(l.items, obj)
			}
			if limit > 0 && l.len() == limit {
				more := page.More || i < len(page.Items)-1
				if !more {
					return l, nil
				}
				next := strings.TrimPrefix(kv.Key, prefix) + "\x00"
				if f.everything() {
					n := page.RemainingCount + int64(len(page.Items)-1-i)
					l.remaining = &n
				}
				l.cont = encodeContinue(l.rev, next)
				return l, nil
			}
		}
		if !page.More || len(page.Items) == 0 {
			return l, nil
		}
		opts.StartKey = page.Items[len(page.Items)-1].Key + "\x00"
	}
}

// list handles GET on a collection.
func (s *Server) list(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	q := r.URL.Query()
	f, err := parseFilter(e.res, q)
	if err != nil {
		return err
	}
	var limit int64
	if l := q.Get("limit"); l != "" {
		limit, err = strconv.ParseInt(l, 10, 64)
		if err != nil || limit < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", l))
		}
	}
	table := wantsTable(r)
	metadata, metadataProtobuf := metadataFormat(r)
	_, hasProtobuf := e.res.New().(protoMarshaler)
	// A protobuf client listing everything gets the stored encodings as they are.
	raw := !table && !metadata && prefersProtobuf(r) && f.everything() && e.res.Storage == nil && hasProtobuf
	l, err := s.listStored(ctx, e, ri.Namespace, f, limit, q.Get("continue"), q.Get("resourceVersion"), q.Get("resourceVersionMatch"), raw)
	if err != nil {
		return err
	}
	items, rev, cont, remaining := l.items, l.rev, l.cont, l.remaining
	listGVK := e.res.GVK.GroupVersion().WithKind(e.res.GVK.Kind + "List")
	if raw {
		lm := &metav1.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont, RemainingItemCount: remaining}
		data, err := e.store.encodeRawList(listGVK, lm, l.raw)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		w.Header().Set("Content-Type", protobufType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
		return nil
	}
	if table {
		return s.writeTable(w, r, e, items, rev, cont, remaining)
	}
	if metadata {
		list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}}
		list.ResourceVersion = strconv.FormatInt(rev, 10)
		list.Continue = cont
		list.RemainingItemCount = remaining
		list.Items = make([]metav1.PartialObjectMetadata, 0, len(items))
		for _, obj := range items {
			list.Items = append(list.Items, *partialMetadata(obj))
		}
		writeEncoded(w, http.StatusOK, list, metadataProtobuf)
		return nil
	}
	list := e.res.NewList()
	if err := meta.SetList(list, items); err != nil {
		return apierrors.NewInternalError(err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	lm.SetResourceVersion(strconv.FormatInt(rev, 10))
	lm.SetContinue(cont)
	lm.SetRemainingItemCount(remaining)
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	writeObject(w, r, http.StatusOK, list)
	return nil
}

// update handles PUT of an object or its status.
func (s *Server) update(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	obj, warnings, err := s.decodeBody(r, e)
	if err != nil {
		return err
	}
	dry, err := isDryRun(r)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() != ri.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), ri.Name))
	}
	if e.res.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != ri.Namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	out, code, moreWarnings, err := s.updateObject(ctx, e, ri.Namespace, ri.Name, ri.Subresource, dry, func(current runtime.Object) (runtime.Object, error) {
		return obj.DeepCopyObject(), nil
	})
	if err != nil {
		return err
	}
	addWarnings(w, append(warnings, moreWarnings...))
	writeObject(w, r, code, out)
	return nil
}

// mutateFunc computes the new object from the current one. It may run several times
// when a concurrent write makes the compare-and-swap fail.
type mutateFunc func(current runtime.Object) (runtime.Object, error)

// updateObject is the one update path (PUT, PATCH, status, scale, finalize): it reads
// the current object, applies mutate, enforces the strategy and writes with a
// compare-and-swap on the revision, retrying when the client did not pin a resourceVersion.
func (s *Server) updateObject(ctx context.Context, e *entry, ns, name, sub string, dry bool, mutate mutateFunc) (runtime.Object, int, []string, error) {
	for attempt := 0; ; attempt++ {
		current, rev, err := e.store.get(ctx, ns, name)
		if err != nil {
			return nil, 0, nil, err
		}
		obj, err := mutate(current.DeepCopyObject())
		if err != nil {
			return nil, 0, nil, err
		}
		m, _ := meta.Accessor(obj)
		cm, _ := meta.Accessor(current)
		pinned := m.GetResourceVersion() != ""
		if pinned && m.GetResourceVersion() != cm.GetResourceVersion() {
			return nil, 0, nil, apierrors.NewConflict(e.store.gr, name, errors.New(conflictMessage))
		}
		warnings, err := s.mutate(ctx, AdmitUpdate, e, sub, ns, name, obj, current, dry)
		if err != nil {
			return nil, 0, nil, err
		}
		if err := s.prepareUpdateTracked(ctx, e, obj, current, sub); err != nil {
			return nil, 0, nil, err
		}
		if e.res.Warnings != nil && sub == "" {
			warnings = append(warnings, safeWarnings(e.res, obj, current)...)
		}
		ops, err := s.admit(ctx, AdmitUpdate, e, obj, current, dry)
		if err != nil {
			return nil, 0, nil, err
		}
		more, err := s.validate(ctx, AdmitUpdate, e, sub, obj, current, dry)
		if err != nil {
			return nil, 0, nil, err
		}
		warnings = append(warnings, more...)
		newData, err := e.store.encode(obj)
		if err != nil {
			return nil, 0, nil, apierrors.NewInternalError(err)
		}
		oldData, _ := e.store.encode(current)
		if string(newData) == string(oldData) {
			// A no-op write keeps the resourceVersion, as Kubernetes does.
			return current, http.StatusOK, warnings, nil
		}
		if dry {
			return obj, http.StatusOK, warnings, nil
		}
		if s.shouldDeleteNow(e, obj) {
			kv, err := s.cfg.Storage.Delete(ctx, e.store.key(ns, name), rev, s.releaseOps(ctx, e, current)...)
			if err == nil {
				s.observeWrite(e, name, nil, kv.ModRevision)
				m.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
				return obj, http.StatusOK, warnings, nil
			}
			if errors.Is(err, storage.ErrConflict) && !pinned && attempt < 20 {
				continue
			}
			return nil, 0, nil, e.store.apiError(err, name)
		}
		newRev, err := s.cfg.Storage.Update(ctx, e.store.key(ns, name), newData, rev, ops...)
		if err != nil {
			if errors.Is(err, storage.ErrConflict) && !pinned && attempt < 20 {
				continue
			}
			var ke *storage.KeyError
			if errors.As(err, &ke) && errors.Is(err, storage.ErrExists) && !pinned && attempt < 20 {
				continue
			}
			return nil, 0, nil, s.admissionConflict(e, err, name)
		}
		m.SetResourceVersion(strconv.FormatInt(newRev, 10))
		obj.GetObjectKind().SetGroupVersionKind(e.res.GVK)
		s.observeWrite(e, name, obj, newRev)
		return obj, http.StatusOK, warnings, nil
	}
}

// prepareUpdate keeps server-owned metadata, splits spec and status writes, bumps the
// generation and runs the update strategy.
func (s *Server) prepareUpdate(e *entry, obj, current runtime.Object, sub string) error {
	m, _ := meta.Accessor(obj)
	cm, _ := meta.Accessor(current)
	m.SetUID(cm.GetUID())
	m.SetCreationTimestamp(cm.GetCreationTimestamp())
	m.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(cm.GetDeletionGracePeriodSeconds())
	m.SetGeneration(cm.GetGeneration())
	m.SetNamespace(cm.GetNamespace())
	m.SetSelfLink("")
	m.SetManagedFields(cm.GetManagedFields())
	if m.GetGenerateName() == "" {
		m.SetGenerateName(cm.GetGenerateName())
	}
	if m.GetResourceVersion() == "" {
		// An unconditional write: the version it replaces is the current one.
		m.SetResourceVersion(cm.GetResourceVersion())
	}
	if h := e.res.FindHandler(sub); h != nil && h.OwnsValidation {
		// The handler changed one part, status included (pods/binding sets PodScheduled),
		// and validated it: the status split and update strategy would undo or refuse it.
		return nil
	}
	status := sub == "status" && e.res.Status != nil
	if e.res.Status != nil {
		if status {
			// A status write changes status only.
			keep := current.DeepCopyObject()
			if err := copyField(keep, obj, "Status"); err != nil {
				return apierrors.NewInternalError(err)
			}
			km, _ := meta.Accessor(keep)
			km.SetResourceVersion(m.GetResourceVersion())
			statusMetadata(e.store.gr, km, m)
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(keep).Elem())
			m, _ = meta.Accessor(obj)
		} else if err := copyField(obj, current, "Status"); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	if err := s.runUpdateStrategy(e, obj, current, status, e.res.Subresources[sub]); err != nil {
		return err
	}
	if e.res.TrackGeneration && !status && specChanged(obj, current) {
		m.SetGeneration(cm.GetGeneration() + 1)
	}
	return nil
}

// copyField copies the named top-level struct field from src to dst (same type).
func copyField(dst, src runtime.Object, name string) error {
	if u, ok := dst.(*unstructured.Unstructured); ok {
		return copyUnstructuredField(u, src, name)
	}
	dv := reflect.ValueOf(dst).Elem().FieldByName(name)
	sv := reflect.ValueOf(src).Elem().FieldByName(name)
	if !dv.IsValid() || !sv.IsValid() || !dv.CanSet() {
		return fmt.Errorf("type %T has no field %s", dst, name)
	}
	dv.Set(sv)
	return nil
}

// specChanged reports whether anything but metadata and status differs.
func specChanged(a, b runtime.Object) bool {
	if u, ok := a.(*unstructured.Unstructured); ok {
		return unstructuredSpecChanged(u, b)
	}
	av := reflect.ValueOf(a).Elem()
	bv := reflect.ValueOf(b).Elem()
	t := av.Type()
	for i := 0; i < t.NumField(); i++ {
		switch t.Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return true
		}
	}
	return false
}

// shouldDeleteNow reports whether an object being deleted has lost its last finalizer.
func (s *Server) shouldDeleteNow(e *entry, obj runtime.Object) bool {
	m, _ := meta.Accessor(obj)
	if m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	// The resource may hold it longer: a namespace for its spec finalizers, a pod for
	// its node unless its grace period has been set to zero.
	return !finalizing(e, obj) && !awaitsGrace(e, obj)
}
