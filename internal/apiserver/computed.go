package apiserver

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// serveComputed hands a request for a computed resource (registry.Resource.Computed)
// to its handler: only its served verbs, no subresources.
func (s *Server) serveComputed(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, req Request, e *entry) error {
	if ri.Subresource != "" {
		return notFoundPath()
	}
	if !e.res.HasVerb(ri.Verb) {
		return apierrors.NewMethodNotSupported(e.store.gr, ri.Verb)
	}
	h := s.cfg.Computed[e.res.GVR()]
	if h == nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s is not served by this API server", e.store.gr))
	}
	return h(ctx, w, r, req)
}
