package authn

import (
	"bytes"
	"crypto/x509"
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
)

// RequestHeaderConfig is how a front proxy (an authenticating proxy, or the aggregator
// of another API server) names the user it authenticated: headers trusted only on a
// request whose client certificate chains to the front-proxy CA and, when AllowedNames
// is not empty, has one of those common names. These are kube-apiserver's
// --requestheader-* flags; the values of DefaultRequestHeaders are the ones kubeadm
// sets and kube-aggregator's proxy sends.
type RequestHeaderConfig struct {
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
	AllowedNames        []string
}

// DefaultRequestHeaders returns the header names of kube-aggregator's proxy
// (X-Remote-User, X-Remote-Uid, X-Remote-Group, X-Remote-Extra-) and allowedNames as the
// proxies' common names.
func DefaultRequestHeaders(allowedNames ...string) RequestHeaderConfig {
	return RequestHeaderConfig{
		UsernameHeaders:     []string{"X-Remote-User"},
		UIDHeaders:          []string{"X-Remote-Uid"},
		GroupHeaders:        []string{"X-Remote-Group"},
		ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
		AllowedNames:        allowedNames,
	}
}

// RequestHeader authenticates requests of a front proxy by the user its headers name,
// with k8s.io/apiserver's request-header authenticator: the client certificate must
// verify with a front-proxy CA for client authentication and carry an allowed common
// name (any, when AllowedNames is empty); the user is the first username header's
// value (no answer without one), its groups every group header's values, its extra the
// prefixed headers' (X-Remote-Extra-Scopes: a → extra["scopes"]=["a"], keys unescaped).
// The headers of an authenticated request are removed from it once read, so nothing
// after the authenticator sees them.
type RequestHeader struct {
	auth authenticator.Request
	cas  []*x509.Certificate
}

var _ Authenticator = (*RequestHeader)(nil)

// NewRequestHeader returns the authenticator for front proxies whose certificates
// chain to one of cas.
func NewRequestHeader(cas []*x509.Certificate, cfg RequestHeaderConfig) *RequestHeader {
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	verify := func() (x509.VerifyOptions, bool) {
		return x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, true
	}
	return &RequestHeader{cas: slices.Clone(cas), auth: headerrequest.NewDynamicVerifyOptionsSecure(verify,
		headerrequest.StaticStringSlice(cfg.AllowedNames), headerrequest.StaticStringSlice(cfg.UsernameHeaders),
		headerrequest.StaticStringSlice(cfg.UIDHeaders), headerrequest.StaticStringSlice(cfg.GroupHeaders),
		headerrequest.StaticStringSlice(cfg.ExtraHeaderPrefixes))}
}

// Authenticate implements Authenticator. A request without a client certificate, or
// whose certificate was not issued by a front-proxy CA, gets no answer (other
// authenticators decide); one from a front-proxy CA that does not verify, or with a
// common name not allowed, is an error.
func (a *RequestHeader) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || !a.issuedHere(r.TLS.PeerCertificates[0]) {
		return nil, false, nil
	}
	resp, ok, err := a.auth.AuthenticateRequest(r)
	if err != nil || !ok {
		return nil, false, err
	}
	u := resp.User
	return &User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}, true, nil
}

// issuedHere tells apart, without verifying a signature, the certificates that name a
// front-proxy CA as their issuer: most requests carry the cluster CA's client
// certificates, which the x509 verification would reject at a cost on every request.
func (a *RequestHeader) issuedHere(leaf *x509.Certificate) bool {
	return slices.ContainsFunc(a.cas, func(ca *x509.Certificate) bool { return bytes.Equal(leaf.RawIssuer, ca.RawSubject) })
}
