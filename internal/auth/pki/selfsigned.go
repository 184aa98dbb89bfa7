package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// SelfSignedRequest describes a certificate signed by its own key, for
// endpoints whose clients do not verify it against the cluster CA (the
// agent's streaming endpoint, the ingress fallback) and for test images.
type SelfSignedRequest struct {
	// CommonName and Organizations form the subject.
	CommonName    string
	Organizations []string
	// DNSNames and IPs are the subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// NotBefore and NotAfter bound the validity; both are required.
	NotBefore, NotAfter time.Time
	// Client adds client auth to the server auth every such certificate has.
	Client bool
	// CA marks the certificate as a CA that may sign others, as test
	// certificates often are so that clients can trust them directly.
	CA bool
	// Key signs the certificate; nil generates a fresh ECDSA P-256 key.
	Key crypto.Signer
	// Serial is the serial number; nil draws a random one. A fixed Key
	// with a deterministic signature (Ed25519) and a fixed Serial give
	// the same certificate bytes at every call.
	Serial *big.Int
}

// SelfSign creates the certificate req describes and returns its DER
// encoding and the key that signed it.
func SelfSign(req SelfSignedRequest) (der []byte, key crypto.Signer, err error) {
	if req.NotBefore.IsZero() || req.NotAfter.IsZero() || !req.NotAfter.After(req.NotBefore) {
		return nil, nil, errors.New("self-signed certificate: NotBefore and NotAfter must be set, NotAfter later")
	}
	key = req.Key
	if key == nil {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, nil, fmt.Errorf("generating key for %q: %w", req.CommonName, err)
		}
	}
	serial := req.Serial
	if serial == nil {
		if serial, err = randomSerial(); err != nil {
			return nil, nil, err
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organizations},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
		NotBefore:    req.NotBefore,
		NotAfter:     req.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if req.CA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating self-signed certificate for %q: %w", req.CommonName, err)
	}
	return der, key, nil
}

// SelfSignedTLS is SelfSign as a certificate a TLS server can present.
func SelfSignedTLS(req SelfSignedRequest) (tls.Certificate, error) {
	der, key, err := SelfSign(req)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// SelfSignedPEM is SelfSign as PEM: the certificate, and the key in PKCS#8.
func SelfSignedPEM(req SelfSignedRequest) (certPEM, keyPEM []byte, err error) {
	der, key, err := SelfSign(req)
	if err != nil {
		return nil, nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key of %q: %w", req.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}
