package aggregator

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/authentication/user"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/tranche/tranche/internal/auth/pki"
)

// TestProxyFrontProxyIdentity: the proxy presents the front-proxy client certificate to
// an extension server that requires one from the front-proxy CA (as the
// sample-apiserver's request-header authentication does), for proxied requests and for
// discovery, and sends the requester as X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra-*, replacing the client's own X-Remote-* headers.
func TestProxyFrontProxyIdentity(t *testing.T) {
	fp, err := pki.EnsureFrontProxy(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ext := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/wardle.example.com/v1alpha1" {
			_, _ = io.WriteString(w, `{"kind":"APIResourceList","groupVersion":"wardle.example.com/v1alpha1",`+
				`"resources":[{"name":"flunders","singularName":"flunder","namespaced":true,"kind":"Flunder","verbs":["get"]}]}`)
			return
		}
		var lines []string
		for k, vs := range r.Header {
			if strings.HasPrefix(k, "X-Remote-") || k == "Authorization" {
				lines = append(lines, k+"="+strings.Join(vs, ","))
			}
		}
		sort.Strings(lines)
		_, _ = io.WriteString(w, "cn="+r.TLS.PeerCertificates[0].Subject.CommonName+"\n"+strings.Join(lines, "\n"))
	}))
	ext.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: fp.CA.Pool(), MinVersion: tls.VersionTLS12}
	ext.StartTLS()
	t.Cleanup(ext.Close)

	p := proxyFixture(t, ext, apiregv1.ConditionTrue)
	p.ClientCert, p.ClientKey = fp.CertPEM, fp.KeyPEM
	p.User = func(context.Context) user.Info {
		return &user.DefaultInfo{Name: "alice", UID: "uid-1", Groups: []string{"devs", "system:authenticated"},
			Extra: map[string][]string{"scopes": {"a", "b"}, "acme.com/project": {"p1"}}}
	}
	req := httptest.NewRequest("GET", "/apis/wardle.example.com/v1alpha1/namespaces/x/flunders", nil)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Add("X-Remote-Group", "system:masters")
	req.Header.Add("X-Remote-Extra-Spoofed", "yes")
	rec := httptest.NewRecorder()
	p.Proxy("wardle.example.com", "v1alpha1").ServeHTTP(rec, req)
	want := strings.Join([]string{"cn=front-proxy-client",
		"X-Remote-Extra-Acme.com%2fproject=p1",
		"X-Remote-Extra-Scopes=a,b",
		"X-Remote-Group=devs,system:authenticated",
		"X-Remote-Uid=uid-1",
		"X-Remote-User=alice"}, "\n")
	if rec.Code != http.StatusOK {
		t.Fatalf("proxied: %d %s", rec.Code, rec.Body.String())
	}
	if diff := cmp.Diff(want, rec.Body.String()); diff != "" {
		t.Errorf("what the extension server saw (-want +got):\n%s", diff)
	}

	if d := p.Discovery(); len(d) != 1 || d[0].Resources == nil || len(d[0].Resources.APIResources) != 1 {
		t.Errorf("discovery through the front-proxy certificate: %+v", d)
	}

	// Without the certificate the extension server refuses the connection.
	bare := proxyFixture(t, ext, apiregv1.ConditionTrue)
	rec = httptest.NewRecorder()
	bare.Proxy("wardle.example.com", "v1alpha1").ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("proxied without the front-proxy certificate: %d %s, want 503", rec.Code, rec.Body.String())
	}
}
