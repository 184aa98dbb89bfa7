package gc

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// resourceInfo maps a kind to the resource that serves it.
type resourceInfo struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
}

// ignoredResources are never watched, as in Kubernetes: events are many,
// short-lived and never owners.
var ignoredResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// mapper resolves the apiVersion and kind of an ownerReference to a
// resource. It is immutable once built.
type mapper struct {
	byGVK map[schema.GroupVersionKind]resourceInfo
	// byGK holds the preferred version of each kind, for references
	// written with a version the server no longer serves.
	byGK map[schema.GroupKind]resourceInfo
}

// newMapper indexes all served resources (all versions) and the preferred
// ones. Subresources are skipped.
func newMapper(all, preferred []*metav1.APIResourceList) mapper {
	m := mapper{byGVK: map[schema.GroupVersionKind]resourceInfo{}, byGK: map[schema.GroupKind]resourceInfo{}}
	index := func(lists []*metav1.APIResourceList, add func(resourceInfo)) {
		for _, list := range lists {
			if list == nil {
				continue
			}
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			if err != nil {
				continue
			}
			for _, r := range list.APIResources {
				if strings.Contains(r.Name, "/") || r.Kind == "" {
					continue
				}
				add(resourceInfo{gvr: gv.WithResource(r.Name), gvk: gv.WithKind(r.Kind), namespaced: r.Namespaced})
			}
		}
	}
	index(all, func(ri resourceInfo) { m.byGVK[ri.gvk] = ri })
	index(preferred, func(ri resourceInfo) {
		m.byGVK[ri.gvk] = ri
		m.byGK[ri.gvk.GroupKind()] = ri
	})
	return m
}

// lookup resolves apiVersion and kind; ok is false for unknown kinds.
func (m mapper) lookup(apiVersion, kind string) (ri resourceInfo, ok bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ri, false
	}
	if ri, ok = m.byGVK[gv.WithKind(kind)]; ok {
		return ri, true
	}
	ri, ok = m.byGK[schema.GroupKind{Group: gv.Group, Kind: kind}]
	return ri, ok
}

// monitorable picks from the preferred resources those the collector
// watches: listable, watchable and deletable, not subresources, not ignored.
func monitorable(preferred []*metav1.APIResourceList) map[schema.GroupVersionResource]resourceInfo {
	out := map[schema.GroupVersionResource]resourceInfo{}
	need := []string{"list", "watch", "delete"}
	for _, list := range preferred {
		if list == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			gvr := gv.WithResource(r.Name)
			if strings.Contains(r.Name, "/") || ignoredResources[gvr.GroupResource()] || !sets.New(r.Verbs...).HasAll(need...) {
				continue
			}
			out[gvr] = resourceInfo{gvr: gvr, gvk: gv.WithKind(r.Kind), namespaced: r.Namespaced}
		}
	}
	return out
}
