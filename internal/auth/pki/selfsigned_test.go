package pki

import (
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSelfSign(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	der, key, err := SelfSign(SelfSignedRequest{
		CommonName:    "svc",
		Organizations: []string{"o"},
		DNSNames:      []string{"localhost"},
		IPs:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:     now,
		NotAfter:      now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		t.Errorf("not signed by its own key: %v", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		t.Error("returned key is not the certificate's")
	}
	got := []any{cert.Subject.CommonName, cert.Subject.Organization, cert.DNSNames, cert.IPAddresses[0].String(),
		cert.NotBefore, cert.NotAfter, cert.KeyUsage, cert.ExtKeyUsage, cert.IsCA}
	want := []any{"svc", []string{"o"}, []string{"localhost"}, "127.0.0.1",
		now, now.Add(time.Hour), x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("certificate (-want +got):\n%s", diff)
	}
	if _, err := tls.X509KeyPair(mustPEM(t, SelfSignedPEM)); err != nil {
		t.Errorf("PEM pair does not load: %v", err)
	}
}

func mustPEM(t *testing.T, f func(SelfSignedRequest) ([]byte, []byte, error)) ([]byte, []byte) {
	t.Helper()
	c, k, err := f(SelfSignedRequest{CommonName: "x", NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), Client: true})
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TestSelfSignReproducible: image layers carry such a certificate, and a
// layer's digest must not change from one build to the next.
func TestSelfSignReproducible(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	req := SelfSignedRequest{
		CommonName: "localhost",
		NotBefore:  time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:   time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
		CA:         true,
		Client:     true,
		Key:        key,
		Serial:     big.NewInt(1),
	}
	c1, k1, err := SelfSignedPEM(req)
	if err != nil {
		t.Fatal(err)
	}
	c2, k2, err := SelfSignedPEM(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c1, c2) || !bytes.Equal(k1, k2) {
		t.Error("the same key and serial gave different certificates")
	}
	pair, err := tls.X509KeyPair(c1, k1)
	if err != nil {
		t.Fatal(err)
	}
	if cert := pair.Leaf; cert == nil || !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 || len(cert.ExtKeyUsage) != 2 {
		t.Errorf("CA certificate with client auth: %+v", cert)
	}
}

func TestSelfSignNeedsValidity(t *testing.T) {
	now := time.Now()
	for _, req := range []SelfSignedRequest{{}, {NotBefore: now}, {NotBefore: now, NotAfter: now.Add(-time.Second)}} {
		if _, _, err := SelfSign(req); err == nil {
			t.Errorf("SelfSign(%v .. %v) succeeded", req.NotBefore, req.NotAfter)
		}
	}
}
