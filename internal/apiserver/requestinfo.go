package apiserver

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requestInfo is what a request path and method say about the request.
type requestInfo struct {
	// IsResourceRequest is false for /api, /apis, /version, /healthz and the like.
	IsResourceRequest bool
	Path              string
	Verb              string // get list watch create update patch delete deletecollection
	APIPrefix         string // "api" or "apis"
	APIGroup          string
	APIVersion        string
	Namespace         string
	Resource          string
	Subresource       string
	Name              string
	// Parts are the remaining path parts after the subresource (pods/NAME/proxy/...).
	Parts []string
}

// parseRequestInfo follows Kubernetes' URL layout:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE[/...]]] and
// /apis/GROUP/VERSION/..., with the legacy /watch/ prefix before the resource.
func parseRequestInfo(r *http.Request) *requestInfo {
	ri := &requestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return ri
	}
	ri.APIPrefix = parts[0]
	parts = parts[1:]
	if ri.APIPrefix == "apis" {
		if len(parts) < 3 {
			return ri
		}
		ri.APIGroup = parts[0]
		parts = parts[1:]
	}
	ri.APIVersion = parts[0]
	parts = parts[1:]
	if len(parts) == 0 {
		return ri
	}
	ri.IsResourceRequest = true
	watchPrefix := false
	if parts[0] == "watch" {
		watchPrefix = true
		parts = parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		ri.Namespace = parts[1]
		if len(parts) == 2 {
			// The namespace object itself.
			ri.Resource, ri.Name = "namespaces", parts[1]
			ri.Namespace = ""
			parts = nil
		} else if len(parts) >= 3 && (parts[2] == "finalize" || parts[2] == "status") && len(parts) == 3 {
			ri.Resource, ri.Name, ri.Subresource = "namespaces", parts[1], parts[2]
			ri.Namespace = ""
			parts = nil
		} else {
			parts = parts[2:]
		}
	}
	if parts != nil {
		ri.Resource = parts[0]
		if len(parts) > 1 {
			ri.Name = parts[1]
		}
		if len(parts) > 2 {
			ri.Subresource = parts[2]
		}
		if len(parts) > 3 {
			ri.Parts = parts[3:]
		}
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodPost:
		ri.Verb = "create"
	case http.MethodGet, http.MethodHead:
		ri.Verb = "get"
		if ri.Name == "" {
			ri.Verb = "list"
		}
		if watchPrefix || isTrue(q.Get("watch")) {
			ri.Verb = "watch"
		}
	case http.MethodPut:
		ri.Verb = "update"
	case http.MethodPatch:
		ri.Verb = "patch"
	case http.MethodDelete:
		ri.Verb = "delete"
		if ri.Name == "" {
			ri.Verb = "deletecollection"
		}
	}
	return ri
}

func isTrue(s string) bool { return s == "true" || s == "1" }

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// notFound answers a path the server does not serve as kube-apiserver does. Under /api
// and under the prefix of a group it serves (go-restful's web services there), it is a
// NotFound Status with the generic message and empty details; anywhere else (an unknown
// group, a path outside the API) it is the plain "404 page not found" of its final
// handler. Either way client-go reports "the server could not find the requested
// resource".
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) error {
	parts := splitPath(r.URL.Path)
	if len(parts) > 0 && parts[0] == "api" || len(parts) > 1 && parts[0] == "apis" && s.servesGroup(parts[1]) {
		return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
	}
	http.NotFound(w, r)
	return nil
}

// servesGroup reports whether any served resource belongs to group.
func (s *Server) servesGroup(group string) bool {
	for _, e := range s.routes.Load().entries {
		if e.res.GVK.Group == group {
			return true
		}
	}
	return false
}
