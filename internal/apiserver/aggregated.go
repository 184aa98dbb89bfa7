package apiserver

import (
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Aggregated routes the group versions that extension API servers serve: kube-
// aggregator's proxy in front of the API server's own handlers.
type Aggregated interface {
	// Proxy returns the handler of group/version when an APIService backed by a Service
	// serves it, else nil (the API server serves it, or nobody does).
	Proxy(group, version string) http.Handler
	// Discovery returns the group versions extension API servers serve, with their
	// resources as the servers list them (nil when they could not be fetched), for the
	// API server's discovery documents.
	Discovery() []AggregatedGroupVersion
}

// AggregatedGroupVersion is one group version an extension API server serves.
type AggregatedGroupVersion struct {
	GroupVersion schema.GroupVersion
	// Resources is the server's APIResourceList; nil marks the version stale.
	Resources *metav1.APIResourceList
}

// proxyAggregated hands a request below /apis/GROUP/VERSION to the extension API
// server of that group version, once the request is authenticated and authorized;
// false when no APIService backed by a Service serves it.
func (s *Server) proxyAggregated(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Aggregated == nil {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/apis/")
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return false
	}
	h := s.cfg.Aggregated.Proxy(parts[0], parts[1])
	if h == nil {
		return false
	}
	h.ServeHTTP(w, r)
	return true
}

// aggregatedGroupVersions are the group versions extension servers serve that the API
// server does not serve itself.
func (s *Server) aggregatedGroupVersions() []AggregatedGroupVersion {
	if s.cfg.Aggregated == nil {
		return nil
	}
	var out []AggregatedGroupVersion
	for _, agv := range s.cfg.Aggregated.Discovery() {
		if agv.GroupVersion.Group != "" && len(s.entriesOf(agv.GroupVersion)) == 0 {
			out = append(out, agv)
		}
	}
	return out
}

// aggregatedAPIGroups are the legacy discovery groups of the extension servers' group
// versions (/apis), versions in the order Discovery gives them, the first preferred.
func (s *Server) aggregatedAPIGroups() []metav1.APIGroup {
	var out []metav1.APIGroup
	index := map[string]int{}
	for _, agv := range s.aggregatedGroupVersions() {
		gv := agv.GroupVersion
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		i, ok := index[gv.Group]
		if !ok {
			if s.apiGroup(gv.Group) != nil {
				continue // a group the API server serves keeps its own document
			}
			index[gv.Group] = len(out)
			out = append(out, metav1.APIGroup{Name: gv.Group, PreferredVersion: v})
			i = len(out) - 1
		}
		out[i].Versions = append(out[i].Versions, v)
	}
	return out
}

// addAggregatedDiscovery appends the extension servers' groups to an aggregated
// discovery document of /apis.
func (s *Server) addAggregatedDiscovery(out *apidiscoveryv2.APIGroupDiscoveryList) {
	byGroup := map[string]int{}
	for i := range out.Items {
		byGroup[out.Items[i].Name] = i
	}
	for _, agv := range s.aggregatedGroupVersions() {
		gv := agv.GroupVersion
		v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		if agv.Resources == nil {
			v.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
		} else {
			v.Resources = resourceDiscovery(gv, agv.Resources.APIResources)
		}
		i, ok := byGroup[gv.Group]
		if !ok {
			out.Items = append(out.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}})
			i = len(out.Items) - 1
			byGroup[gv.Group] = i
		}
		out.Items[i].Versions = append(out.Items[i].Versions, v)
	}
}

// resourceDiscovery turns a legacy resource list into aggregated discovery's form:
// "name/sub" entries become subresources of "name".
func resourceDiscovery(gv schema.GroupVersion, list []metav1.APIResource) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	index := map[string]int{}
	kind := func(r metav1.APIResource) *metav1.GroupVersionKind {
		k := &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind}
		if r.Group != "" || r.Version != "" {
			k.Group, k.Version = r.Group, r.Version
		}
		return k
	}
	for _, r := range list {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[r.Name] = len(out)
		out = append(out, apidiscoveryv2.APIResourceDiscovery{Resource: r.Name, SingularResource: r.SingularName, Scope: scope,
			Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories, ResponseKind: kind(r)})
	}
	for _, r := range list {
		parent, sub, ok := strings.Cut(r.Name, "/")
		i, found := index[parent]
		if !ok || !found {
			continue
		}
		out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub,
			ResponseKind: kind(r), Verbs: r.Verbs})
	}
	return out
}
