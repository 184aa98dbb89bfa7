package authn

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
)

// ClientCert authenticates requests by their TLS client certificate: the subject's
// common name is the user name and its organizations are the groups, as in
// Kubernetes. The TLS server is expected to run with ClientAuth
// VerifyClientCertIfGiven and the cluster CA as ClientCAs; when Roots is set the
// chain is verified here as well, for servers that do not verify it themselves.
type ClientCert struct {
	// Roots, when not nil, are the CAs a client certificate must chain to.
	Roots *x509.CertPool
}

var _ Authenticator = ClientCert{}

// Authenticate implements Authenticator. A request without a client certificate, or
// with one without a common name, gets no answer.
func (c ClientCert) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	if c.Roots != nil {
		intermediates := x509.NewCertPool()
		for _, cert := range r.TLS.PeerCertificates[1:] {
			intermediates.AddCert(cert)
		}
		opts := x509.VerifyOptions{Roots: c.Roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, false, fmt.Errorf("verifying client certificate %q: %w", leaf.Subject.CommonName, err)
		}
	} else if len(r.TLS.VerifiedChains) == 0 {
		// The TLS server did not verify the certificate: trusting it would let anyone
		// name themselves.
		return nil, false, fmt.Errorf("client certificate %q was not verified by the TLS server", leaf.Subject.CommonName)
	}
	if leaf.Subject.CommonName == "" {
		return nil, false, nil
	}
	return &User{Name: leaf.Subject.CommonName, Groups: slices.Clone(leaf.Subject.Organization)}, true, nil
}
