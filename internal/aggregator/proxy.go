package aggregator

import (
	"context"
	"net/http"
	"net/http/httputil"
	"sync/atomic"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/transport"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	apireglisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/clusterdial"
)

// Proxy is the API server's apiserver.Aggregated: a request below /apis/GROUP/VERSION
// whose APIService is backed by a Service goes to a ready endpoint of that Service over
// TLS (verified with the APIService's caBundle for NAME.NAMESPACE.svc, unless
// insecureSkipTLSVerify), presenting the front-proxy client certificate, with the
// requester's identity in the X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra-* headers and the client's credentials removed, as kube-aggregator
// proxies. An APIService that is not Available answers 503 "service unavailable". It
// proxies nothing until Start has run.
type Proxy struct {
	// User returns the authenticated requester of ctx's request (nil when anonymous).
	User func(ctx context.Context) user.Info
	// Dial reaches cluster addresses; nil dials directly (tests on loopback).
	Dial clusterdial.DialFunc
	// ClientCert and ClientKey are the front-proxy client certificate and key (PEM),
	// by which extension servers trust the X-Remote-* headers (kube-apiserver's
	// --proxy-client-cert-file); without them the servers see an anonymous TLS client.
	ClientCert, ClientKey []byte

	state     atomic.Pointer[proxyState]
	discovery discoveryCache
}

var _ apiserver.Aggregated = (*Proxy)(nil)

type proxyState struct {
	apiServices apireglisters.APIServiceLister
	resolver    *clusterdial.EndpointResolver
	dial        *transport.DialHolder
}

// Proxy implements apiserver.Aggregated.
func (p *Proxy) Proxy(group, version string) http.Handler {
	st := p.state.Load()
	if st == nil {
		return nil
	}
	a, err := st.apiServices.Get(version + "." + group)
	if err != nil || a.Spec.Service == nil {
		return nil
	}
	return &serviceProxy{p: p, st: st, a: a}
}

// serviceProxy proxies one request to the Service of APIService a.
type serviceProxy struct {
	p  *Proxy
	st *proxyState
	a  *apiregv1.APIService
}

func (h *serviceProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !apiregv1helper.IsAPIServiceConditionTrue(h.a, apiregv1.Available) {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	svc := h.a.Spec.Service
	port := int32(443)
	if svc.Port != nil {
		port = *svc.Port
	}
	loc, err := h.st.resolver.ResolveEndpoint(svc.Namespace, svc.Name, port)
	if err != nil {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	rt, err := transport.New(remote.BuildTransportConfig(h.st.dial, h.p.ClientCert, h.p.ClientKey, h.a))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var u user.Info
	if h.p.User != nil {
		u = h.p.User(r.Context())
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", loc.Host
			pr.Out.Host = loc.Host
			// The client's credentials stay here; the extension server learns who asks
			// from the front-proxy headers.
			pr.Out.Header.Del("Authorization")
			for k := range pr.Out.Header {
				if len(k) > 12 && http.CanonicalHeaderKey(k[:12]) == "Impersonate-" {
					pr.Out.Header.Del(k)
				}
			}
			if u != nil {
				transport.SetAuthProxyHeaders(pr.Out, u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra())
			} else {
				transport.SetAuthProxyHeaders(pr.Out, user.Anonymous, "", []string{user.AllUnauthenticated}, nil)
			}
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "Error trying to reach service: "+err.Error(), http.StatusServiceUnavailable)
		},
	}
	rp.ServeHTTP(w, r)
}
