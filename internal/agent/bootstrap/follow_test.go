package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"

	"github.com/tranche/tranche/internal/auth/pki"
)

// switchingManager is a certificate.Manager whose current certificate the test sets.
type switchingManager struct {
	cur atomic.Pointer[tls.Certificate]
}

func (m *switchingManager) Start()                    {}
func (m *switchingManager) Stop()                     {}
func (m *switchingManager) ServerHealthy() bool       { return true }
func (m *switchingManager) Current() *tls.Certificate { return m.cur.Load() }

// TestFollowCertificate: a client following a manager presents its current
// certificate, and once the manager has another, a request on a connection kept
// alive until then presents the new one within kubelet's period (10 s; the test
// allows 15), well before client-go would read certificate files again (every five
// minutes).
func TestFollowCertificate(t *testing.T) {
	ca, err := pki.EnsureCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	pair := func(cn string) *tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
		c, err := tls.X509KeyPair(issue(t, ca, key.Public(), pkix.Name{CommonName: cn}, time.Now().Add(-time.Minute), time.Hour), keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	m := &switchingManager{}
	m.cur.Store(pair("first"))
	rc := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := FollowCertificate(ctx, rc, m, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	who := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := who(); got != "first" {
		t.Fatalf("presented %q, want first", got)
	}
	if got := who(); got != "first" {
		t.Fatalf("second request presented %q, want first", got)
	}
	m.cur.Store(pair("second"))
	deadline := time.Now().Add(15 * time.Second)
	for who() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the client still presents the former certificate 15 s after the manager changed it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := FollowCertificate(ctx, rc, m, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("following twice: want an error (the client has a transport of its own)")
	}
}
