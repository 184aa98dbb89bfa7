package apiserver

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// subresource is one served subresource of a resource.
type subresource struct {
	name  string
	kind  schema.GroupVersionKind // response kind
	verbs []string
}

// subresourcesOf lists what the handlers serve below /NAME/ for e.
func subresourcesOf(e *entry) []subresource {
	var out []subresource
	gvk := e.res.GVK
	if e.res.Status != nil {
		out = append(out, subresource{"status", gvk, []string{"get", "patch", "update"}})
	}
	if e.res.Scale != nil {
		out = append(out, subresource{"scale", scaleGVK, []string{"get", "patch", "update"}})
	}
	for _, name := range slices.Sorted(maps.Keys(e.res.Subresources)) {
		out = append(out, subresource{name, gvk, []string{"get", "patch", "update"}})
	}
	for _, h := range e.res.Handlers {
		if h.Hidden {
			continue
		}
		kind := h.Kind
		if kind.Empty() {
			kind = gvk
		}
		out = append(out, subresource{h.Name, kind, h.Verbs})
	}
	return out
}

// groupVersions returns the served group versions, core first, then groups by name.
func (s *Server) groupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, e := range s.routes.Load().entries {
		gv := e.res.GVK.GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Group == "") != (out[j].Group == "") {
			return out[i].Group == ""
		}
		return out[i].Group < out[j].Group
	})
	return out
}

func (s *Server) entriesOf(gv schema.GroupVersion) []*entry {
	var out []*entry
	for _, e := range s.routes.Load().entries {
		if e.res.GVK.GroupVersion() == gv {
			out = append(out, e)
		}
	}
	return out
}

// resourceList is the APIResourceList of one group version.
func (s *Server) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, e := range s.entriesOf(gv) {
		r := e.res
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Plural, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.GVK.Kind,
			Verbs: r.ServedVerbs(), ShortNames: r.ShortNames, Categories: r.Categories,
		})
		for _, sub := range subresourcesOf(e) {
			ar := metav1.APIResource{Name: r.Plural + "/" + sub.name, Namespaced: r.Namespaced, Kind: sub.kind.Kind, Verbs: sub.verbs}
			if sub.kind.GroupVersion() != gv {
				ar.Group, ar.Version = sub.kind.Group, sub.kind.Version
			}
			list.APIResources = append(list.APIResources, ar)
		}
	}
	return list
}

const (
	aggregatedV2      = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	aggregatedV2Beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)

// aggregatedKind returns the aggregated discovery media type the client accepts, if any.
func aggregatedKind(r *http.Request) string {
	accept := strings.ReplaceAll(r.Header.Get("Accept"), " ", "")
	for _, part := range strings.Split(accept, ",") {
		if strings.Contains(part, "g=apidiscovery.k8s.io") && strings.Contains(part, "as=APIGroupDiscoveryList") {
			if strings.Contains(part, "v=v2beta1") {
				return aggregatedV2Beta1
			}
			if strings.Contains(part, "v=v2") {
				return aggregatedV2
			}
		}
	}
	return ""
}

// aggregated builds the aggregated discovery document for /api (core) or /apis.
func (s *Server) aggregated(core bool, mediaType string) *apidiscoveryv2.APIGroupDiscoveryList {
	apiVersion := "apidiscovery.k8s.io/v2"
	if mediaType == aggregatedV2Beta1 {
		apiVersion = "apidiscovery.k8s.io/v2beta1"
	}
	out := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: apiVersion}}
	byGroup := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	for _, gv := range s.groupVersions() {
		if (gv.Group == "") != core {
			continue
		}
		g := byGroup[gv.Group]
		if g == nil {
			out.Items = append(out.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}})
			g = &out.Items[len(out.Items)-1]
			byGroup[gv.Group] = g
		}
		v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, e := range s.entriesOf(gv) {
			r := e.res
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			rd := apidiscoveryv2.APIResourceDiscovery{
				Resource: r.Plural, SingularResource: r.Singular, Scope: scope, Verbs: r.ServedVerbs(),
				ShortNames: r.ShortNames, Categories: r.Categories,
				ResponseKind: &metav1.GroupVersionKind{Group: r.GVK.Group, Version: r.GVK.Version, Kind: r.GVK.Kind},
			}
			for _, sub := range subresourcesOf(e) {
				rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource:  sub.name,
					ResponseKind: &metav1.GroupVersionKind{Group: sub.kind.Group, Version: sub.kind.Version, Kind: sub.kind.Kind},
					Verbs:        sub.verbs,
				})
			}
			v.Resources = append(v.Resources, rd)
		}
		g.Versions = append(g.Versions, v)
	}
	// Pointers into out.Items stay valid: Items only grows before a group's first use.
	if !core {
		s.addAggregatedDiscovery(out)
	}
	return out
}

func (s *Server) serveAggregated(w http.ResponseWriter, core bool, mediaType string) {
	data, _ := json.Marshal(s.aggregated(core, mediaType))
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// serveDiscovery answers /api, /apis, /api/v1, /apis/GROUP and /apis/GROUP/VERSION.
// It returns false when the path is not a discovery path.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	parts := splitPath(r.URL.Path)
	switch {
	case len(parts) == 1 && parts[0] == "api":
		if mt := aggregatedKind(r); mt != "" {
			s.serveAggregated(w, true, mt)
			return true
		}
		writeJSON(w, http.StatusOK, &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
		})
		return true
	case len(parts) == 1 && parts[0] == "apis":
		if mt := aggregatedKind(r); mt != "" {
			s.serveAggregated(w, false, mt)
			return true
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, gv := range s.groupVersions() {
			if gv.Group != "" {
				list.Groups = append(list.Groups, *s.apiGroup(gv.Group))
			}
		}
		list.Groups = append(list.Groups, s.aggregatedAPIGroups()...)
		writeJSON(w, http.StatusOK, list)
		return true
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		writeJSON(w, http.StatusOK, s.resourceList(schema.GroupVersion{Version: "v1"}))
		return true
	case len(parts) == 2 && parts[0] == "apis":
		if g := s.apiGroup(parts[1]); g != nil {
			g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			writeJSON(w, http.StatusOK, g)
			return true
		}
		for _, g := range s.aggregatedAPIGroups() {
			if g.Name == parts[1] {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeJSON(w, http.StatusOK, &g)
				return true
			}
		}
	case len(parts) == 3 && parts[0] == "apis":
		gv := schema.GroupVersion{Group: parts[1], Version: parts[2]}
		if len(s.entriesOf(gv)) > 0 {
			writeJSON(w, http.StatusOK, s.resourceList(gv))
			return true
		}
	}
	return false
}

func (s *Server) apiGroup(name string) *metav1.APIGroup {
	var g *metav1.APIGroup
	for _, gv := range s.groupVersions() {
		if gv.Group != name {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if g == nil {
			g = &metav1.APIGroup{Name: name, PreferredVersion: v}
		}
		g.Versions = append(g.Versions, v)
	}
	return g
}
