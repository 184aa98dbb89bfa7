package bootstraptoken

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
)

// ClusterInfoKubeconfig is the kubeconfig kubeadm publishes in kube-public/cluster-info:
// one cluster (server URL and CA), no user.
func ClusterInfoKubeconfig(server string, caPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	return clientcmd.Write(*cfg)
}

// CAHash is the public key pin of a CA certificate as kubeadm prints it for
// --discovery-token-ca-cert-hash: "sha256:" and the hex SHA-256 of its
// SubjectPublicKeyInfo.
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseCAHash checks a --ca-cert-hash value and returns it lower-cased.
func ParseCAHash(s string) (string, error) {
	algo, digest, ok := strings.Cut(s, ":")
	if !ok || algo != "sha256" {
		return "", fmt.Errorf("CA cert hash %q: want sha256:<64 hex digits> (the format `tranche token create` prints)", s)
	}
	if b, err := hex.DecodeString(digest); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("CA cert hash %q: want sha256:<64 hex digits> (the format `tranche token create` prints)", s)
	}
	return "sha256:" + strings.ToLower(digest), nil
}

// ErrNoSignature means cluster-info carries no signature for the token's ID: the
// cluster does not know the token, it has expired, or it lacks the signing usage.
type ErrNoSignature struct{ ID string }

func (e ErrNoSignature) Error() string {
	return fmt.Sprintf("cluster-info has no signature for token id %q: the token is unknown to this cluster, has expired, or lacks usage-bootstrap-signing", e.ID)
}

// Discovered is what a verified cluster-info says.
type Discovered struct {
	Server string
	CAPEM  []byte
	CA     *x509.Certificate
}

// VerifyClusterInfo checks cm (kube-public/cluster-info, fetched without trust) as
// `kubeadm join` does: its kubeconfig must carry a JWS signature made with t, and when
// caHash is not empty the CA's public key must match it. Every failure says which
// check failed.
func VerifyClusterInfo(cm *v1.ConfigMap, t Token, caHash string) (*Discovered, error) {
	content, ok := cm.Data[bootstrapapi.KubeConfigKey]
	if !ok {
		return nil, fmt.Errorf("cluster-info ConfigMap has no %q key", bootstrapapi.KubeConfigKey)
	}
	sig, ok := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+t.ID]
	if !ok {
		return nil, ErrNoSignature{ID: t.ID}
	}
	if !jws.DetachedTokenIsValid(sig, content, t.ID, t.Secret) {
		return nil, fmt.Errorf("wrong token: the JWS signature of cluster-info for token id %q does not verify with this token's secret; can't trust this API server", t.ID)
	}
	d, err := ClusterInfoCA(cm)
	if err != nil {
		return nil, err
	}
	if caHash != "" {
		if got := CAHash(d.CA); got != caHash {
			return nil, fmt.Errorf("CA hash mismatch: the cluster CA's public key is %s, --ca-cert-hash wants %s", got, caHash)
		}
	}
	return d, nil
}

// ClusterInfoCA reads the server and CA of cluster-info's kubeconfig, unverified.
func ClusterInfoCA(cm *v1.ConfigMap) (*Discovered, error) {
	cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
	if err != nil {
		return nil, fmt.Errorf("cluster-info kubeconfig: %w", err)
	}
	var cluster *clientcmdapi.Cluster
	for _, c := range cfg.Clusters {
		cluster = c
		break
	}
	if cluster == nil || cluster.Server == "" || len(cluster.CertificateAuthorityData) == 0 {
		return nil, fmt.Errorf("cluster-info kubeconfig has no cluster with a server and a CA")
	}
	block, _ := pem.Decode(cluster.CertificateAuthorityData)
	if block == nil {
		return nil, fmt.Errorf("cluster-info kubeconfig: the CA is not PEM")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("cluster-info kubeconfig: the CA: %w", err)
	}
	return &Discovered{Server: cluster.Server, CAPEM: cluster.CertificateAuthorityData, CA: ca}, nil
}
