package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage"
)

// resourceStore keeps one served resource in the key-value store: key layout,
// encoding, and the mapping of storage errors onto API errors.
type resourceStore struct {
	s   storage.Interface
	res *registry.Resource
	// gr names the resource in error messages ("services", "deployments.apps").
	gr schema.GroupResource
	// storedGVR is where objects live: the resource itself or, for a view, Storage.GVR.
	storedGVR schema.GroupVersionResource
	// newStored makes an empty object of the stored type.
	newStored func() runtime.Object
	// convert, when set, converts objects between the versions of the resource
	// (DynamicOptions.Convert).
	convert func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error)
}

func registryGroupDir(group string) string {
	if group == "" {
		return "core"
	}
	return group
}

// prefix returns the key prefix of a namespace ("" = all namespaces), ending in "/".
func (rs *resourceStore) prefix(ns string) string {
	p := "/registry/" + registryGroupDir(rs.storedGVR.Group) + "/" + rs.storedGVR.Resource + "/"
	if ns != "" {
		p += ns + "/"
	}
	return p
}

func (rs *resourceStore) key(ns, name string) string {
	if rs.res.Namespaced {
		return rs.prefix(ns) + name
	}
	return rs.prefix("") + name
}

// decode turns a stored value into a served object with its resourceVersion.
func (rs *resourceStore) decode(value []byte, rev int64) (runtime.Object, error) {
	obj := rs.newStored()
	if err := DecodeStored(value, obj); err != nil {
		return nil, fmt.Errorf("decoding stored %s: %w", rs.gr, err)
	}
	obj, err := rs.convertTo(obj, rs.res.GVK.GroupVersion())
	if err != nil {
		return nil, err
	}
	if v := rs.res.Storage; v != nil {
		obj = v.FromStorage(obj)
	}
	obj.GetObjectKind().SetGroupVersionKind(rs.res.GVK)
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(rev, 10))
	}
	return obj, nil
}

// encode serialises a served object for storage, without its resourceVersion.
func (rs *resourceStore) encode(obj runtime.Object) ([]byte, error) {
	stored := obj
	if v := rs.res.Storage; v != nil {
		stored = v.ToStorage(obj.DeepCopyObject())
		var err error
		if stored, err = rs.convertTo(stored, v.GVR.GroupVersion()); err != nil {
			return nil, err
		}
		stored.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: v.GVR.Group, Version: v.GVR.Version, Kind: rs.res.GVK.Kind})
	} else {
		stored = obj.DeepCopyObject()
		stored.GetObjectKind().SetGroupVersionKind(rs.res.GVK)
	}
	m, err := meta.Accessor(stored)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion("")
	m.SetSelfLink("")
	return encodeStored(stored)
}

// convertTo converts obj to version gv with rs.convert, when set and obj is of another
// version; a failure is the 500 kube-apiserver answers with.
func (rs *resourceStore) convertTo(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	if rs.convert == nil {
		return obj, nil
	}
	from := obj.GetObjectKind().GroupVersionKind()
	if from.Empty() {
		obj.GetObjectKind().SetGroupVersionKind(rs.res.GVK)
		from = rs.res.GVK
	}
	if from.GroupVersion() == gv {
		return obj, nil
	}
	out, err := rs.convert(obj, gv)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

func (rs *resourceStore) get(ctx context.Context, ns, name string) (runtime.Object, int64, error) {
	kv, err := rs.s.Get(ctx, rs.key(ns, name))
	if err != nil {
		return nil, 0, rs.apiError(err, name)
	}
	obj, err := rs.decode(kv.Value, kv.ModRevision)
	return obj, kv.ModRevision, err
}

// apiError maps a storage error onto the Status a client expects.
func (rs *resourceStore) apiError(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(rs.gr, name)
	case errors.Is(err, storage.ErrExists):
		var ke *storage.KeyError
		if errors.As(err, &ke) && ke.Key != "" && ke.Key[0] == '/' && !isObjectKey(ke.Key) {
			return apierrors.NewConflict(rs.gr, name, fmt.Errorf("allocation %s is already in use", ke.Key))
		}
		return apierrors.NewAlreadyExists(rs.gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(rs.gr, name, errors.New(conflictMessage))
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired("too old resource version")
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	if se, ok := storeFailure(err); ok {
		return se
	}
	return apierrors.NewInternalError(err)
}

func isObjectKey(k string) bool { return len(k) > 10 && k[:10] == "/registry/" }

const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"
