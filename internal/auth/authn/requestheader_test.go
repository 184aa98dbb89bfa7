package authn

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche/tranche/internal/auth/pki"
)

// TestRequestHeader: the X-Remote-* headers name the user only on a request whose
// client certificate comes from the front-proxy CA with an allowed name; they are
// removed once read; a certificate of the cluster CA leaves them to other
// authenticators, which then see no X-Remote-* header either way.
func TestRequestHeader(t *testing.T) {
	dir := t.TempDir()
	fp, err := pki.EnsureFrontProxy(dir)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := pki.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A CA that copies the front-proxy CA's name but has another key.
	forger, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	forger.Cert.RawSubject = fp.CA.Cert.RawSubject
	forger.Cert.Subject = fp.CA.Cert.Subject

	issue := func(ca *pki.CA, cn string) *x509.Certificate {
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
	proxy := func() *x509.Certificate {
		c, err := pki.ParseCertificate(fp.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}()
	headers := http.Header{
		"X-Remote-User":                     {"alice"},
		"X-Remote-Uid":                      {"uid-1"},
		"X-Remote-Group":                    {"devs", "system:authenticated"},
		"X-Remote-Extra-Scopes":             {"a", "b"},
		"X-Remote-Extra-Acme.com%2fproject": {"p1"},
	}
	alice := &User{Name: "alice", UID: "uid-1", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string][]string{"scopes": {"a", "b"}, "acme.com/project": {"p1"}}}

	cases := []struct {
		name    string
		cert    *x509.Certificate // nil: plain HTTP
		headers http.Header
		want    *User
		wantErr bool
	}{
		{name: "front proxy names the user", cert: proxy, headers: headers, want: alice},
		{name: "front proxy without a user header", cert: proxy, headers: http.Header{"X-Remote-Group": {"devs"}}},
		{name: "front-proxy CA, name not allowed", cert: issue(fp.CA, "intruder"), headers: headers, wantErr: true},
		{name: "cluster CA certificate named front-proxy-client", cert: issue(cluster, pki.FrontProxyClientName), headers: headers},
		{name: "forged front-proxy CA", cert: issue(forger, pki.FrontProxyClientName), headers: headers, wantErr: true},
		{name: "plain HTTP", headers: headers},
	}
	rh := NewRequestHeader([]*x509.Certificate{fp.CA.Cert}, DefaultRequestHeaders(pki.FrontProxyClientName))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/apis", nil)
			r.Header = tc.headers.Clone()
			if tc.cert != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert}}
			}
			got, ok, err := rh.Authenticate(r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
			if ok {
				for h := range r.Header {
					if len(h) >= 9 && http.CanonicalHeaderKey(h[:9]) == "X-Remote-" {
						t.Errorf("header %s left on the request", h)
					}
				}
			}
		})
	}

	// In the server's chain, a cluster client certificate is its own user whatever
	// X-Remote-User says.
	chain := Union{rh, ClientCert{Roots: cluster.Pool()}}
	r := httptest.NewRequest("GET", "/apis", nil)
	r.Header = headers.Clone()
	bob := issue(cluster, "bob")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{bob}}
	got, ok, err := chain.Authenticate(r)
	if err != nil || !ok || got.Name != "bob" {
		t.Errorf("cluster certificate with X-Remote-User: %+v, %v, %v; want bob", got, ok, err)
	}
}
