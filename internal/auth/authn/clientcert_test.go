package authn

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/auth/pki"
)

// issueClient returns a client certificate of ca for cn.
func issueClient(t testing.TB, ca *pki.CA, cn string) *x509.Certificate {
	t.Helper()
	certPEM, _, err := ca.Issue(pki.IssueRequest{CommonName: cn, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func certRequest(cert *x509.Certificate) *http.Request {
	req := httptest.NewRequest("GET", "/api", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	return req
}

// TestClientCertRemembersVerified: NewClientCert verifies a certificate once and then
// accepts it while its chain is valid, not after; a certificate of another CA is
// refused every time and never remembered.
func TestClientCertRemembersVerified(t *testing.T) {
	cluster, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := NewClientCert(cluster.Pool())
	c.now = func() time.Time { return now }
	good, forged := issueClient(t, cluster, "alice"), issueClient(t, other, "mallory")
	for i := range 2 {
		if u, ok, err := c.Authenticate(certRequest(good)); err != nil || !ok || u.Name != "alice" {
			t.Fatalf("request %d with the cluster CA's certificate: %v %v %v", i, u, ok, err)
		}
		if _, ok, err := c.Authenticate(certRequest(forged)); err == nil || ok {
			t.Fatalf("request %d with another CA's certificate: ok %v, err %v", i, ok, err)
		}
	}
	if n := len(c.verified.valid); n != 1 {
		t.Errorf("%d certificates remembered, want the one that verified", n)
	}
	now = good.NotAfter.Add(time.Second)
	if _, ok, err := c.Authenticate(certRequest(good)); err == nil || ok {
		t.Errorf("the remembered certificate after it expired: ok %v, err %v", ok, err)
	}
	now = good.NotBefore.Add(-time.Minute)
	if _, ok, err := c.Authenticate(certRequest(good)); err == nil || ok {
		t.Errorf("the remembered certificate before it is valid: ok %v, err %v", ok, err)
	}
}

// BenchmarkClientCert compares authenticating one client's requests with each
// verified (verify) and with NewClientCert's memory (remembered).
func BenchmarkClientCert(b *testing.B) {
	cluster, err := pki.EnsureCA(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	req := certRequest(issueClient(b, cluster, "alice"))
	for _, bc := range []struct {
		name string
		c    ClientCert
	}{{"verify", ClientCert{Roots: cluster.Pool()}}, {"remembered", NewClientCert(cluster.Pool())}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok, err := bc.c.Authenticate(req); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
