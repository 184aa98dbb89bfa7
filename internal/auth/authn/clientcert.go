package authn

import (
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// ClientCert authenticates requests by their TLS client certificate: the subject's
// common name is the user name and its organizations are the groups, as in
// Kubernetes. The TLS server is expected to run with ClientAuth
// VerifyClientCertIfGiven and the cluster CA as ClientCAs; when Roots is set the
// chain is verified here as well, for servers that do not verify it themselves.
type ClientCert struct {
	// Roots, when not nil, are the CAs a client certificate must chain to.
	Roots *x509.CertPool
	// verified, when not nil (NewClientCert), remembers the certificates that chained to
	// Roots until their chain's validity ends: a client sends the same certificate with
	// every request, and checking its signatures each time cost a server more CPU than
	// the etcd write of a create (make bench-ha, profiled).
	verified *verifiedCerts
	// now is the clock (time.Now when nil).
	now func() time.Time
}

var _ Authenticator = ClientCert{}

// NewClientCert is a ClientCert for roots that verifies each certificate once for as
// long as its chain is valid.
func NewClientCert(roots *x509.CertPool) ClientCert {
	return ClientCert{Roots: roots, verified: &verifiedCerts{valid: map[[sha256.Size]byte]validity{}}}
}

// Authenticate implements Authenticator. A request without a client certificate, or
// with one without a common name, gets no answer.
func (c ClientCert) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	if c.Roots != nil {
		if err := c.verify(leaf, r.TLS.PeerCertificates[1:]); err != nil {
			return nil, false, err
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

// verify checks that leaf chains to c.Roots for client authentication now, with the
// intermediates the client sent, or that it did so earlier within its chain's validity.
func (c ClientCert) verify(leaf *x509.Certificate, sent []*x509.Certificate) error {
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	var key [sha256.Size]byte
	if c.verified != nil {
		key = sha256.Sum256(leaf.Raw)
		if c.verified.holds(key, now) {
			return nil
		}
	}
	intermediates := x509.NewCertPool()
	for _, cert := range sent {
		intermediates.AddCert(cert)
	}
	opts := x509.VerifyOptions{Roots: c.Roots, Intermediates: intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	chains, err := leaf.Verify(opts)
	if err != nil {
		return fmt.Errorf("verifying client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if c.verified != nil {
		c.verified.add(key, chains[0])
	}
	return nil
}

// verifiedCerts holds the validity of certificates that verified, by their DER bytes'
// hash. It is bounded: when full it starts again empty.
type verifiedCerts struct {
	mu    sync.Mutex
	valid map[[sha256.Size]byte]validity
}

// maxVerifiedCerts bounds verifiedCerts: more clients than this at once only cost
// verifications again.
const maxVerifiedCerts = 4096

// validity is when every certificate of a verified chain is valid.
type validity struct{ notBefore, notAfter time.Time }

func (v *verifiedCerts) holds(key [sha256.Size]byte, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.valid[key]
	return ok && !now.Before(w.notBefore) && !now.After(w.notAfter)
}

func (v *verifiedCerts) add(key [sha256.Size]byte, chain []*x509.Certificate) {
	w := validity{notBefore: chain[0].NotBefore, notAfter: chain[0].NotAfter}
	for _, cert := range chain[1:] {
		if cert.NotBefore.After(w.notBefore) {
			w.notBefore = cert.NotBefore
		}
		if cert.NotAfter.Before(w.notAfter) {
			w.notAfter = cert.NotAfter
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.valid) >= maxVerifiedCerts {
		clear(v.valid)
	}
	v.valid[key] = w
}
