package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// proxyHTTP serves pods/proxy and services/proxy (a BackendPod location) as
// kube-apiserver's proxy subresources do, with k8s.io/apimachinery's UpgradeAwareHandler
// and its wrapping transport: a GET or HEAD of .../proxy with nothing after it is
// redirected (301) to .../proxy/, links and redirects in the backend's HTML responses are
// rewritten to go through the same proxy path, and X-Forwarded-* headers are set.
// Upgrade requests keep going through forward, which streams both ways. The caller's
// credentials (Authorization, Impersonate-*) never reach the pod, as kube-apiserver's
// authentication and impersonation filters remove them.
func (s *Server) proxyHTTP(w http.ResponseWriter, r *http.Request, target *url.URL, transport http.RoundTripper, dialMsg string) {
	if httpstream.IsUpgradeRequest(r) {
		s.forward(w, r, target, transport, dialMsg)
		return
	}
	out := r.Clone(r.Context())
	for h := range out.Header {
		if h == "Authorization" || strings.HasPrefix(h, "Impersonate-") {
			out.Header.Del(h)
		}
	}
	loc := *target
	h := proxy.NewUpgradeAwareHandler(&loc, transport, true, false, proxyResponder{s: s, dialMsg: dialMsg})
	h.ServeHTTP(w, out)
}

// proxyResponder writes a proxy failure as a Status: the wrapping transport's own
// (503 "error trying to reach service: ...") or a 503 naming what could not be reached.
type proxyResponder struct {
	s       *Server
	dialMsg string
}

func (p proxyResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		err = apierrors.NewServiceUnavailable(fmt.Sprintf("%s: %v", p.dialMsg, err))
	}
	p.s.log.Debug("proxying failed", "err", err)
	writeError(w, p.s.log, err)
}
