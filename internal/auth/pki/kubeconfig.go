package pki

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultContext names the cluster, user and context of a written kubeconfig when the
// caller gives no name.
const DefaultContext = "tranche"

// WriteKubeconfig writes a kubeconfig to path (mode 0600) with one cluster, one user
// and one context, all named context (DefaultContext when empty), set as the current
// context, so `kubectl --kubeconfig path` works as is. The CA, client certificate and
// key are embedded, which keeps the file valid when copied elsewhere.
func WriteKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte, context string) error {
	if context == "" {
		context = DefaultContext
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	cluster.CertificateAuthorityData = caPEM
	cfg.Clusters[context] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.ClientCertificateData = certPEM
	user.ClientKeyData = keyPEM
	cfg.AuthInfos[context] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster = context
	ctx.AuthInfo = context
	cfg.Contexts[context] = ctx
	cfg.CurrentContext = context
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig %s: %w", path, err)
	}
	return writeFile(path, data, 0o600)
}
