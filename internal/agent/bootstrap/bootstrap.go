// Package bootstrap joins an agent to a cluster with a bootstrap token as kubeadm join
// and kubelet's TLS bootstrap do: it discovers the cluster CA from the unauthenticated
// kube-public/cluster-info ConfigMap (trusted through the token's JWS signature and the
// CA's public key pin), requests the node's client certificate through a
// CertificateSigningRequest (signer kubernetes.io/kube-apiserver-client-kubelet), writes
// a kubeconfig using it, and rotates the certificate before it expires with client-go's
// certificate manager (at 70-90% of its lifetime, jittered, as kubelet).
package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/tranche/tranche/internal/bootstraptoken"
)

// Config says where and how to join.
type Config struct {
	// Server is the API server to discover through, https://HOST:PORT.
	Server string
	Token  bootstraptoken.Token
	// CAHash pins the cluster CA's public key ("sha256:<hex>"); empty trusts whatever
	// CA the token's signature vouches for (kubeadm's unsafe skip of CA verification).
	CAHash   string
	NodeName string
	// Dir receives ca.crt, kubeconfig and pki/kubelet-client-*.pem.
	Dir string
	// DiscoveryTimeout bounds the wait for cluster-info to carry the token's signature
	// (the bootstrapsigner adds it shortly after the token is made).
	DiscoveryTimeout time.Duration
	Logger           *slog.Logger
	// NewClient makes the clients of the rotation (kubernetes.NewForConfig when nil);
	// tests give a fake.
	NewClient func(*rest.Config) (kubernetes.Interface, error)
}

// KubeconfigPath is the kubeconfig Join writes under dir.
func KubeconfigPath(dir string) string { return filepath.Join(dir, "kubeconfig") }

func certDir(dir string) string { return filepath.Join(dir, "pki") }

// certificate store's name: files pki/kubelet-client-current.pem and dated copies.
const storePair = "kubelet-client"

// Join makes sure dir holds a kubeconfig with a valid node client certificate,
// joining with the token when it does not, and returns its path and the certificate
// manager that rotates that certificate (started; stop it when the agent ends). A
// node that joined before keeps its certificate and needs no valid token.
func Join(ctx context.Context, cfg Config) (string, certificate.Manager, error) {
	if err := os.MkdirAll(certDir(cfg.Dir), 0o700); err != nil {
		return "", nil, err
	}
	store, err := certificate.NewFileStore(storePair, certDir(cfg.Dir), certDir(cfg.Dir), "", "")
	if err != nil {
		return "", nil, err
	}
	caPath := filepath.Join(cfg.Dir, "ca.crt")
	caPEM, caErr := os.ReadFile(caPath)
	cur, curErr := store.Current()
	server := cfg.Server
	if prev, err := clientcmd.LoadFromFile(KubeconfigPath(cfg.Dir)); err == nil {
		// A node that joined before keeps the server cluster-info named then.
		if ctx, ok := prev.Contexts[prev.CurrentContext]; ok && prev.Clusters[ctx.Cluster] != nil && prev.Clusters[ctx.Cluster].Server != "" {
			server = prev.Clusters[ctx.Cluster].Server
		}
	}
	if cfg.CAHash == "" {
		cfg.Logger.Warn("joining without --ca-cert-hash: the CA is trusted on the token's signature alone")
	}
	if caErr != nil || curErr != nil || cur.Leaf == nil || time.Now().After(cur.Leaf.NotAfter) {
		d, err := Discover(ctx, cfg)
		if err != nil {
			return "", nil, err
		}
		caPEM, server = d.CAPEM, d.Server
		if err := os.WriteFile(caPath, caPEM, 0o644); err != nil {
			return "", nil, err
		}
		certPEM, keyPEM, err := requestClientCertificate(ctx, bootstrapConfig(server, caPEM, cfg.Token), cfg.NodeName)
		if err != nil {
			return "", nil, err
		}
		if _, err := store.Update(certPEM, keyPEM); err != nil {
			return "", nil, fmt.Errorf("storing the node's certificate: %w", err)
		}
		cfg.Logger.Info("joined: node client certificate issued", "server", server, "dir", certDir(cfg.Dir))
	}
	pair := filepath.Join(certDir(cfg.Dir), storePair+"-current.pem")
	if err := writeKubeconfig(KubeconfigPath(cfg.Dir), server, caPath, pair); err != nil {
		return "", nil, err
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			rc := &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertFile: pair, KeyFile: pair}}
			if cfg.NewClient != nil {
				return cfg.NewClient(rc)
			}
			return kubernetes.NewForConfig(rc)
		},
		Template:         nodeTemplate(cfg.NodeName),
		SignerName:       certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:        certificate.DefaultKubeletClientGetUsages,
		CertificateStore: store,
	})
	if err != nil {
		return "", nil, err
	}
	m.Start()
	return KubeconfigPath(cfg.Dir), m, nil
}

func nodeTemplate(node string) *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
}

// bootstrapConfig is the token's client of a trusted server.
func bootstrapConfig(server string, caPEM []byte, t bootstraptoken.Token) *rest.Config {
	return &rest.Config{Host: server, BearerToken: t.String(), TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, Timeout: 30 * time.Second}
}

// requestClientCertificate creates a CSR for the node's client certificate with a new
// ECDSA P-256 key and waits until it is approved and signed.
func requestClientCertificate(ctx context.Context, rc *rest.Config, node string) (certPEM, keyPEM []byte, err error) {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, nodeTemplate(node), key)
	if err != nil {
		return nil, nil, err
	}
	csrPEM := pemEncode("CERTIFICATE REQUEST", der)
	name, uid, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		certificate.DefaultKubeletClientGetUsages(key), key)
	if err != nil {
		return nil, nil, explainAuth(fmt.Errorf("requesting the node's certificate: %w", err))
	}
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	certPEM, err = csr.WaitForCertificate(waitCtx, client, name, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for CertificateSigningRequest %s to be approved and signed: %w", name, err)
	}
	return certPEM, keyPEM, nil
}

// explainAuth says which token fault a 401 means.
func explainAuth(err error) error {
	if !apierrors.IsUnauthorized(err) {
		return err
	}
	if strings.Contains(err.Error(), "has expired") {
		return fmt.Errorf("expired token: %w", err)
	}
	return fmt.Errorf("wrong token: the cluster does not know this token or its secret: %w", err)
}

// Discover fetches kube-public/cluster-info without trusting the server, and returns
// the server URL and CA it holds once the token's signature and the CA pin check out.
// When the signature is missing, it retries until cfg.DiscoveryTimeout and then, if
// the CA is pinned (so the token can be sent safely), asks the server whether the token
// is expired, unknown or only lacks the signing usage.
func Discover(ctx context.Context, cfg Config) (*bootstraptoken.Discovered, error) {
	anon := &rest.Config{Host: cfg.Server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 10 * time.Second}
	client, err := kubernetes.NewForConfig(anon)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.DiscoveryTimeout)
	for {
		cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("reading kube-public/cluster-info from %s: %w", cfg.Server, err)
			}
		} else {
			d, err := bootstraptoken.VerifyClusterInfo(cm, cfg.Token, cfg.CAHash)
			var noSig bootstraptoken.ErrNoSignature
			if !errors.As(err, &noSig) {
				return d, err
			}
			if time.Now().After(deadline) {
				return nil, diagnoseUnsigned(ctx, cfg, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// diagnoseUnsigned refines a missing signature: with a pinned CA that matches, the
// token is tried against the server (a list of CSRs, which bootstrappers may do).
func diagnoseUnsigned(ctx context.Context, cfg Config, noSig error) error {
	if cfg.CAHash == "" {
		return noSig
	}
	caPEM, err := pinnedCA(ctx, cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(bootstrapConfig(cfg.Server, caPEM, cfg.Token))
	if err != nil {
		return err
	}
	_, err = client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1})
	if err == nil || apierrors.IsForbidden(err) {
		return fmt.Errorf("token %s authenticates but is not valid for signing (usage-bootstrap-signing is not true), so cluster-info carries no signature for it", cfg.Token.ID)
	}
	return explainAuth(err)
}

// pinnedCA reads cluster-info's CA and checks it against the pin, without a signature.
func pinnedCA(ctx context.Context, cfg Config) ([]byte, error) {
	anon := &rest.Config{Host: cfg.Server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 10 * time.Second}
	client, err := kubernetes.NewForConfig(anon)
	if err != nil {
		return nil, err
	}
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ca, err := bootstraptoken.ClusterInfoCA(cm)
	if err != nil {
		return nil, err
	}
	if got := bootstraptoken.CAHash(ca.CA); got != cfg.CAHash {
		return nil, fmt.Errorf("CA hash mismatch: the cluster CA's public key is %s, --ca-cert-hash wants %s", got, cfg.CAHash)
	}
	return ca.CAPEM, nil
}

func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeKubeconfig writes the node's kubeconfig as kubelet does after its TLS
// bootstrap: the CA file and one file holding the rotating certificate and its key,
// which client-go reloads when it changes.
func writeKubeconfig(path, server, caFile, pairFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: pairFile, ClientKey: pairFile}
	cfg.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	cfg.CurrentContext = "default-context"
	return clientcmd.WriteToFile(*cfg, path)
}
