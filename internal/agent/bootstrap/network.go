package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"

	authbootstrap "github.com/tranche/tranche/internal/auth/bootstrap"
)

// NetworkKubeconfigPath is the pod network's kubeconfig NetworkIdentity writes under dir.
func NetworkKubeconfigPath(dir string) string { return filepath.Join(dir, "network.kubeconfig") }

// certificate store's name of the pod network's identity.
const networkPair = "node-network"

// networkTemplate is the subject of node's pod-network certificate: common name
// system:tranche:node-network:<node> in the group system:tranche:node-network, which
// may read Nodes and nothing else (flannel's service account); the API server's
// csrapproving-node-network approves it for system:node:<node> alone.
func networkTemplate(node string) *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: pkix.Name{CommonName: authbootstrap.NodeNetworkUser + ":" + node,
		Organization: []string{authbootstrap.NodeNetworkUser}}}
}

// NetworkIdentity gives a joined node (Join ran on cfg.Dir) the pod network's own
// identity, which reads every Node where the node's identity may read only its own:
// it requests, with the node's certificate, a client certificate of the signer
// kubernetes.io/kube-apiserver-client for networkTemplate, waits until it is issued,
// writes a kubeconfig using it and returns that path with the manager that rotates
// the certificate as the node's is (started; stop it when the agent ends). A
// certificate issued before is kept.
func NetworkIdentity(ctx context.Context, cfg Config) (string, certificate.Manager, error) {
	node, err := clientcmd.BuildConfigFromFlags("", KubeconfigPath(cfg.Dir))
	if err != nil {
		return "", nil, fmt.Errorf("the node's kubeconfig: %w", err)
	}
	store, err := certificate.NewFileStore(networkPair, certDir(cfg.Dir), certDir(cfg.Dir), "", "")
	if err != nil {
		return "", nil, err
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) {
			if cfg.NewClient != nil {
				return cfg.NewClient(rest.CopyConfig(node))
			}
			return kubernetes.NewForConfig(rest.CopyConfig(node))
		},
		Template:         networkTemplate(cfg.NodeName),
		SignerName:       certificatesv1.KubeAPIServerClientSignerName,
		GetUsages:        certificate.DefaultKubeletClientGetUsages,
		CertificateStore: store,
		Name:             networkPair,
	})
	if err != nil {
		return "", nil, err
	}
	m.Start()
	wait, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for m.Current() == nil {
		select {
		case <-wait.Done():
			m.Stop()
			return "", nil, fmt.Errorf("waiting for the pod network's certificate (a CertificateSigningRequest of signer %s for %s): %w",
				certificatesv1.KubeAPIServerClientSignerName, networkTemplate(cfg.NodeName).Subject.CommonName, context.Cause(wait))
		case <-time.After(200 * time.Millisecond):
		}
	}
	pair := filepath.Join(certDir(cfg.Dir), networkPair+"-current.pem")
	if err := writeKubeconfig(NetworkKubeconfigPath(cfg.Dir), node.Host, node.TLSClientConfig.CAFile, pair); err != nil {
		m.Stop()
		return "", nil, err
	}
	return NetworkKubeconfigPath(cfg.Dir), m, nil
}
