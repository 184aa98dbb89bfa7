package apiserver

import (
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tranche/tranche/internal/registry"
)

// filter is a parsed label and field selector.
type filter struct {
	labels labels.Selector
	fields fields.Selector
	res    *registry.Resource
}

func parseFilter(res *registry.Resource, q url.Values) (*filter, error) {
	f := &filter{labels: labels.Everything(), fields: fields.Everything(), res: res}
	if s := q.Get("labelSelector"); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		f.labels = sel
	}
	if s := q.Get("fieldSelector"); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		// Reject fields the resource does not support, as Kubernetes does.
		supported := f.fieldSet(res.New())
		for _, r := range sel.Requirements() {
			if _, ok := supported[r.Field]; !ok {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
		f.fields = sel
	}
	return f, nil
}

func (f *filter) everything() bool { return f.labels.Empty() && f.fields.Empty() }

func (f *filter) fieldSet(obj runtime.Object) fields.Set {
	set := fields.Set{}
	if f.res.Fields != nil {
		for k, v := range f.res.Fields(obj) {
			set[k] = v
		}
	}
	if m, err := meta.Accessor(obj); err == nil {
		set["metadata.name"] = m.GetName()
		if f.res.Namespaced {
			set["metadata.namespace"] = m.GetNamespace()
		}
	}
	return set
}

func (f *filter) matches(obj runtime.Object) bool {
	if f.everything() {
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if !f.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return f.fields.Empty() || f.fields.Matches(f.fieldSet(obj))
}
