package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/keyutil"

	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/bootstraptoken"
)

// issue signs pub for subject with ca, valid from notBefore for life.
func issue(t *testing.T, ca *pki.CA, pub any, subject pkix.Name, notBefore time.Time, life time.Duration) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject, NotBefore: notBefore, NotAfter: notBefore.Add(life),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestJoinResumesAndRotates: a node that joined before needs no discovery (the server
// is unreachable here); its certificate, past 70-90% of its lifetime, is renewed at
// once through a CSR for system:node:NAME with the kubelet client signer, and the
// kubeconfig keeps pointing at the current pair and at the server the node joined.
func TestJoinResumesAndRotates(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	node := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
	old := issue(t, ca, key.Public(), node, time.Now().Add(-time.Hour), time.Hour+time.Minute)
	if err := os.MkdirAll(certDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := certificate.NewFileStore(storePair, certDir(dir), certDir(dir), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(old, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	pair := filepath.Join(dir, "pki", "kubelet-client-current.pem")
	if err := writeKubeconfig(KubeconfigPath(dir), "https://10.0.0.9:6443", filepath.Join(dir, "ca.crt"), pair); err != nil {
		t.Fatal(err)
	}
	client, requests := signingClient(t, ca)
	path, m, err := Join(context.Background(), Config{Server: "https://127.0.0.1:1", NodeName: "n1", Dir: dir,
		Token: bootstraptoken.Token{ID: "abcdef", Secret: "0123456789abcdef"}, Logger: slog.New(slog.DiscardHandler),
		NewClient: func(*rest.Config) (kubernetes.Interface, error) { return client, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	select {
	case csr := <-requests:
		block, _ := pem.Decode(csr.Spec.Request)
		req, _ := x509.ParseCertificateRequest(block.Bytes)
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || req.Subject.CommonName != "system:node:n1" ||
			strings.Join(req.Subject.Organization, ",") != "system:nodes" {
			t.Errorf("renewal request: signer %s, subject %v", csr.Spec.SignerName, req.Subject)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no renewal requested for a certificate past its rotation deadline")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := store.Current()
		if err == nil && cur.Leaf != nil && cur.Leaf.NotAfter.After(time.Now().Add(time.Hour)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not stored")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if auth.ClientCertificate != pair || auth.ClientKey != auth.ClientCertificate {
		t.Errorf("kubeconfig user %+v", auth)
	}
	if got := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server; got != "https://10.0.0.9:6443" {
		t.Errorf("kubeconfig server %q, want the one the node joined (not --server)", got)
	}
}

func TestExplainAuth(t *testing.T) {
	if err := explainAuth(apierrors.NewUnauthorized("bootstrap token abcdef has expired (2000-01-01T00:00:00Z)")); !strings.HasPrefix(err.Error(), "expired token") {
		t.Errorf("expired: %v", err)
	}
	if err := explainAuth(apierrors.NewUnauthorized("Unauthorized")); !strings.HasPrefix(err.Error(), "wrong token") {
		t.Errorf("unknown: %v", err)
	}
	other := errors.New("connection refused")
	if err := explainAuth(other); err != other {
		t.Errorf("other errors pass through: %v", err)
	}
}

// TestNetworkIdentity: a joined node asks, with its own identity, for the pod network's
// client certificate (signer kube-apiserver-client, system:tranche:node-network:NAME in
// the group system:tranche:node-network) and gets a kubeconfig using it.
func TestNetworkIdentity(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
	nodePair := append(issue(t, ca, key.Public(), pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}, time.Now(), time.Hour), keyPEM...)
	if err := os.MkdirAll(certDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "kubelet-client-current.pem"), nodePair, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeKubeconfig(KubeconfigPath(dir), "https://10.0.0.9:6443", filepath.Join(dir, "ca.crt"), filepath.Join(dir, "pki", "kubelet-client-current.pem")); err != nil {
		t.Fatal(err)
	}
	client, requests := signingClient(t, ca)
	var seen *rest.Config
	path, m, err := NetworkIdentity(context.Background(), Config{NodeName: "n1", Dir: dir, Logger: slog.New(slog.DiscardHandler),
		NewClient: func(rc *rest.Config) (kubernetes.Interface, error) { seen = rc; return client, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	csr := <-requests
	block, _ := pem.Decode(csr.Spec.Request)
	req, _ := x509.ParseCertificateRequest(block.Bytes)
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName || req.Subject.CommonName != "system:tranche:node-network:n1" ||
		strings.Join(req.Subject.Organization, ",") != "system:tranche:node-network" {
		t.Errorf("request: signer %s, subject %v", csr.Spec.SignerName, req.Subject)
	}
	if seen == nil || seen.TLSClientConfig.CertFile != filepath.Join(dir, "pki", "kubelet-client-current.pem") {
		t.Errorf("the request was not made with the node's identity: %+v", seen)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if want := filepath.Join(dir, "pki", "node-network-current.pem"); auth.ClientCertificate != want || auth.ClientKey != want {
		t.Errorf("kubeconfig user %+v, want %s", auth, want)
	}
	if got := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server; got != "https://10.0.0.9:6443" {
		t.Errorf("kubeconfig server %q", got)
	}
}

// signingClient is a fake client whose CertificateSigningRequests are approved and
// signed by ca for a day as they are created; requests receives each one as created.
func signingClient(t *testing.T, ca *pki.CA) (*kubefake.Clientset, <-chan *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	client := kubefake.NewClientset()
	requests := make(chan *certificatesv1.CertificateSigningRequest, 4)
	client.PrependReactor("create", "certificatesigningrequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
		csr := action.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		block, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return true, nil, err
		}
		requests <- csr.DeepCopy()
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}}
		csr.Status.Certificate = issue(t, ca, req.PublicKey, req.Subject, time.Now(), 24*time.Hour)
		return false, nil, nil
	})
	return client, requests
}
