package pki

import (
	"bytes"
	"crypto/x509"
	"path/filepath"
	"testing"
)

// TestEnsureFrontProxy: the front-proxy CA is a CA of its own beside the cluster CA, its
// client certificate (CN front-proxy-client, client auth) chains to it and not to the
// cluster CA, and a second call keeps both.
func TestEnsureFrontProxy(t *testing.T) {
	dir := t.TempDir()
	cluster := mustCA(t, dir)
	fp, err := EnsureFrontProxy(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fp.CA.Cert.Equal(cluster.Cert) || !fp.CA.Cert.IsCA || fp.CA.Cert.Subject.CommonName != "front-proxy-ca" {
		t.Fatalf("front-proxy CA %q (CA %v) is not a CA of its own", fp.CA.Cert.Subject.CommonName, fp.CA.Cert.IsCA)
	}
	cert, err := ParseCertificate(fp.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != FrontProxyClientName || len(cert.Subject.Organization) != 0 {
		t.Errorf("client certificate subject %v, want CN=%s", cert.Subject, FrontProxyClientName)
	}
	verify := func(roots *x509.CertPool) error {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(fp.CA.Pool()); err != nil {
		t.Errorf("client certificate does not verify with the front-proxy CA: %v", err)
	}
	if verify(cluster.Pool()) == nil {
		t.Error("client certificate verifies with the cluster CA")
	}
	if _, err := fp.KeyPair(); err != nil {
		t.Errorf("key pair: %v", err)
	}
	assertMode(t, filepath.Join(dir, FrontProxyCAKeyFile), 0o600)
	assertMode(t, filepath.Join(dir, FrontProxyClientName+".key"), 0o600)

	again, err := EnsureFrontProxy(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.CA.Cert.Equal(fp.CA.Cert) || !bytes.Equal(again.CertPEM, fp.CertPEM) {
		t.Error("a second EnsureFrontProxy replaced the CA or the client certificate")
	}
	if c := mustCA(t, dir); !c.Cert.Equal(cluster.Cert) {
		t.Error("the front proxy replaced the cluster CA")
	}
}
