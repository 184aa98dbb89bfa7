package pki

import (
	"crypto/tls"
	"fmt"
)

// The front proxy's files inside the PKI directory, named as kubeadm names them: a CA
// of its own (front-proxy-ca.crt, front-proxy-ca.key), separate from the cluster CA so
// that no client certificate of the cluster can pass for the proxy, and the proxy's
// client certificate (front-proxy-client.crt, front-proxy-client.key).
const (
	FrontProxyCACertFile = "front-proxy-ca.crt"
	FrontProxyCAKeyFile  = "front-proxy-ca.key"
	// FrontProxyClientName is the client certificate's file name and common name,
	// the name extension API servers allow (requestheader-allowed-names).
	FrontProxyClientName = "front-proxy-client"
)

// FrontProxy is the identity the API server presents when it proxies a request to an
// extension API server (an APIService backed by a Service): a client certificate issued
// by the front-proxy CA, which extension servers trust for the X-Remote-* headers
// naming the requester, as kube-apiserver's --proxy-client-cert-file and
// --requestheader-client-ca-file.
type FrontProxy struct {
	// CA is the front-proxy CA.
	CA *CA
	// CertPEM and KeyPEM are the client certificate (CN front-proxy-client) and its key.
	CertPEM, KeyPEM []byte
}

// EnsureFrontProxy loads or creates the front-proxy CA (CN front-proxy-ca) and the
// front-proxy client certificate in dir, with EnsureCA's and EnsureClient's rules: a
// restarted cluster keeps both, an expiring or foreign certificate is reissued.
func EnsureFrontProxy(dir string) (*FrontProxy, error) {
	ca, err := ensureCA(dir, FrontProxyCACertFile, FrontProxyCAKeyFile, "front-proxy-ca")
	if err != nil {
		return nil, fmt.Errorf("front-proxy CA: %w", err)
	}
	certPEM, keyPEM, err := EnsureClient(dir, ca, FrontProxyClientName, FrontProxyClientName, nil)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	return &FrontProxy{CA: ca, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// KeyPair returns the client certificate for a TLS client configuration.
func (f *FrontProxy) KeyPair() (tls.Certificate, error) {
	return tls.X509KeyPair(f.CertPEM, f.KeyPEM)
}
