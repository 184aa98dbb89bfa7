package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
)

func mustCA(t *testing.T, dir string) *CA {
	t.Helper()
	ca, err := EnsureCA(dir)
	if err != nil {
		t.Fatalf("EnsureCA: %v", err)
	}
	return ca
}

func TestEnsureCALoadsWhatItCreated(t *testing.T) {
	dir := t.TempDir()
	first := mustCA(t, dir)
	second := mustCA(t, dir)
	if !first.Cert.Equal(second.Cert) {
		t.Fatal("second EnsureCA returned a different CA")
	}
	if _, ok := first.Key.(*ecdsa.PrivateKey); !ok {
		t.Fatalf("CA key is %T, want ECDSA", first.Key)
	}
	if got := first.Cert.NotAfter.Sub(first.Cert.NotBefore); got < 10*365*24*time.Hour {
		t.Errorf("CA validity %v, want at least 10 years", got)
	}
	assertMode(t, filepath.Join(dir, CAKeyFile), 0o600)
}

func TestEnsureCARefusesHalfACA(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	if err := os.Remove(filepath.Join(dir, CACertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCA(dir); err == nil {
		t.Fatal("EnsureCA with only ca.key succeeded, want an error")
	}
}

func TestIssue(t *testing.T) {
	ca := mustCA(t, t.TempDir())
	cases := []struct {
		name  string
		req   IssueRequest
		usage x509.ExtKeyUsage
		host  string
	}{
		{name: "serving by DNS name", req: IssueRequest{CommonName: "srv", DNSNames: []string{"kubernetes.default.svc"}, Server: true}, usage: x509.ExtKeyUsageServerAuth, host: "kubernetes.default.svc"},
		{name: "serving by IP", req: IssueRequest{CommonName: "srv", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}, usage: x509.ExtKeyUsageServerAuth, host: "127.0.0.1"},
		{name: "client", req: IssueRequest{CommonName: "admin", Organizations: []string{"system:masters"}, Client: true}, usage: x509.ExtKeyUsageClientAuth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue(tc.req)
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("key pair does not load: %v", err)
			}
			cert, err := ParseCertificate(certPEM)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatalf("issued certificate does not verify against the CA: %v", err)
			}
			if diff := cmp.Diff(tc.req.Organizations, cert.Subject.Organization); diff != "" {
				t.Errorf("organizations (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, err := ca.Issue(IssueRequest{CommonName: "nothing"}); err == nil {
		t.Error("Issue without usage succeeded, want an error")
	}
}

func TestEnsureServing(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	names := []string{"localhost", "kubernetes"}
	first, _, err := EnsureServing(dir, ca, names, ips)
	if err != nil {
		t.Fatal(err)
	}
	assertMode(t, filepath.Join(dir, ServingKeyFile), 0o600)

	cases := []struct {
		name    string
		names   []string
		ips     []net.IP
		reissue bool
	}{
		{name: "same hosts keep the certificate", names: names, ips: ips},
		{name: "same hosts in another order keep the certificate", names: []string{"kubernetes", "localhost"}, ips: []net.IP{net.ParseIP("10.96.0.1"), net.ParseIP("127.0.0.1").To4()}},
		{name: "a new IP reissues", names: names, ips: append(ips, net.ParseIP("10.240.0.1")), reissue: true},
		{name: "a removed name reissues", names: []string{"localhost"}, ips: ips, reissue: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Every case starts from the first certificate.
			if _, _, err := EnsureServing(dir, ca, names, ips); err != nil {
				t.Fatal(err)
			}
			got, _, err := EnsureServing(dir, ca, tc.names, tc.ips)
			if err != nil {
				t.Fatal(err)
			}
			if reissued := !bytes.Equal(got, first); reissued != tc.reissue {
				t.Fatalf("reissued = %v, want %v", reissued, tc.reissue)
			}
			cert, err := ParseCertificate(got)
			if err != nil {
				t.Fatal(err)
			}
			if !sameStrings(cert.DNSNames, tc.names) || !sameIPs(cert.IPAddresses, tc.ips) {
				t.Errorf("certificate names %v %v, want %v %v", cert.DNSNames, cert.IPAddresses, tc.names, tc.ips)
			}
			if tc.reissue {
				if err := os.WriteFile(filepath.Join(dir, ServingCertFile), first, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestEnsureServingReissuesForANewCA(t *testing.T) {
	dir := t.TempDir()
	old := mustCA(t, filepath.Join(dir, "old"))
	first, _, err := EnsureServing(dir, old, []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	current := mustCA(t, filepath.Join(dir, "new"))
	got, _, err := EnsureServing(dir, current, []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, got) {
		t.Fatal("certificate signed by another CA was kept")
	}
}

func TestEnsureClient(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	first, _, err := EnsureClient(dir, ca, "admin", "admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := EnsureClient(dir, ca, "admin", "admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("unchanged client certificate was reissued")
	}
	changed, _, err := EnsureClient(dir, ca, "admin", "admin", []string{"system:masters", "ops"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCertificate(changed)
	if err != nil {
		t.Fatal(err)
	}
	// DER encodes the organizations as a SET, which sorts them.
	if diff := cmp.Diff([]string{"ops", "system:masters"}, cert.Subject.Organization); diff != "" {
		t.Errorf("organizations after change (-want +got):\n%s", diff)
	}
	if _, _, err := EnsureClient(dir, ca, "../escape", "x", nil); err == nil {
		t.Error("EnsureClient with a path as name succeeded, want an error")
	}
}

func TestEnsureSigningKey(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureSigningKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := EnsureSigningKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !publicKeysEqual(first.Public(), second.Public()) {
		t.Fatal("second EnsureSigningKey returned another key")
	}
	assertMode(t, filepath.Join(dir, SigningKeyFile), 0o600)
}

func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	certPEM, keyPEM, err := EnsureClient(dir, ca, "admin", "admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, context, want string }{
		{name: "default names", want: "tranche"},
		{name: "given context", context: "lab", want: "lab"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name, "kubeconfig")
			if err := WriteKubeconfig(path, "https://127.0.0.1:6443", ca.CertPEM, certPEM, keyPEM, tc.context); err != nil {
				t.Fatal(err)
			}
			assertMode(t, path, 0o600)
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatalf("clientcmd cannot load the kubeconfig: %v", err)
			}
			if cfg.CurrentContext != tc.want {
				t.Errorf("current context %q, want %q", cfg.CurrentContext, tc.want)
			}
			rest, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
			if err != nil {
				t.Fatalf("client config: %v", err)
			}
			if rest.Host != "https://127.0.0.1:6443" || !bytes.Equal(rest.TLSClientConfig.CAData, ca.CertPEM) || !bytes.Equal(rest.TLSClientConfig.CertData, certPEM) {
				t.Errorf("rest config does not carry the server and credentials: %+v", rest.TLSClientConfig)
			}
		})
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Errorf("%s has mode %v, want %v", path, got, want)
	}
}
