package server

import (
	"net/http"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
)

// oidcMaxAge is the Cache-Control max-age of the discovery documents, kube-apiserver's
// for keys that do not rotate.
const oidcMaxAge = "public, max-age=3600"

// oidcDiscovery serves the service account issuer's OIDC discovery documents in front
// of next, as kube-apiserver's ServiceAccountIssuerDiscovery: the provider
// configuration at /.well-known/openid-configuration (application/json) and the key
// set at /openid/v1/jwks (application/jwk-set+json), each authorized as a non-resource
// "get" of its path (the system:service-account-issuer-discovery ClusterRole, bound to
// all service accounts).
type oidcDiscovery struct {
	guard        apiserver.Guard
	next         http.Handler
	config, keys []byte
}

func newOIDCDiscovery(guard apiserver.Guard, issuer *authn.Issuer, next http.Handler) (*oidcDiscovery, error) {
	config, keys, err := issuer.OIDCDiscovery()
	if err != nil {
		return nil, err
	}
	return &oidcDiscovery{guard: guard, next: next, config: config, keys: keys}, nil
}

func (o *oidcDiscovery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	var contentType string
	switch r.URL.Path {
	case authn.OpenIDConfigPath:
		body, contentType = o.config, "application/json"
	case authn.JWKSPath:
		body, contentType = o.keys, "application/jwk-set+json"
	default:
		o.next.ServeHTTP(w, r)
		return
	}
	r, ok := authorizeNonResource(o.guard, w, r)
	if !ok {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", oidcMaxAge)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}
