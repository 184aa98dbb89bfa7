// Package pki keeps the cluster's certificate authority and the certificates and keys
// issued from it in one directory: the CA (ca.crt, ca.key), the API server's serving
// certificate (apiserver.crt, apiserver.key), client certificates (NAME.crt, NAME.key)
// and the service account signing key (sa.key). Every Ensure function loads what is
// on disk and creates or reissues only what is missing, expiring or out of date, so a
// restarted cluster keeps its identity. Keys are ECDSA P-256, written with mode 0600.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names inside the PKI directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "apiserver.crt"
	ServingKeyFile  = "apiserver.key"
	SigningKeyFile  = "sa.key"
)

const (
	// caValidity is how long a newly created CA is valid.
	caValidity = 10 * 365 * 24 * time.Hour
	// leafValidity is how long certificates issued by the Ensure functions are valid.
	leafValidity = 365 * 24 * time.Hour
	// renewBefore is how close to expiry an on-disk certificate is reissued.
	renewBefore = 30 * 24 * time.Hour
	// backdate lets a certificate be valid on a machine whose clock is slightly behind.
	backdate = 5 * time.Minute
)

// CA is a certificate authority able to issue serving and client certificates.
type CA struct {
	// Cert is the CA certificate; CertPEM is its PEM encoding as written to ca.crt.
	Cert    *x509.Certificate
	CertPEM []byte
	// Key signs issued certificates.
	Key crypto.Signer
}

// IssueRequest describes one certificate to issue.
type IssueRequest struct {
	// CommonName becomes the subject CN (the user name for client certificates).
	CommonName string
	// Organizations become the subject O (the groups for client certificates).
	Organizations []string
	// DNSNames and IPs are the subject alternative names of a serving certificate.
	DNSNames []string
	IPs      []net.IP
	// Server and Client select the extended key usages (server auth, client auth).
	Server, Client bool
	// Validity is how long the certificate is valid; zero means one year. The
	// certificate never outlives the CA.
	Validity time.Duration
}

// EnsureCA loads the CA from dir/ca.crt and dir/ca.key, or creates a new self-signed
// CA (ECDSA P-256, valid 10 years) when neither file exists. Having only one of the two
// files is an error: silently replacing a CA would invalidate every issued credential.
func EnsureCA(dir string) (*CA, error) {
	return ensureCA(dir, CACertFile, CAKeyFile, "tranche-ca")
}

// ensureCA is EnsureCA for the CA in dir/certFile and dir/keyFile, named cn when new.
func ensureCA(dir, certFile, keyFile, cn string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		return parseCA(certPEM, keyPEM)
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		return createCA(dir, certFile, keyFile, cn)
	case certErr != nil && !errors.Is(certErr, fs.ErrNotExist):
		return nil, fmt.Errorf("reading CA certificate %s: %w", certPath, certErr)
	case keyErr != nil && !errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("reading CA key %s: %w", keyPath, keyErr)
	default:
		return nil, fmt.Errorf("CA in %s is incomplete: %s and %s must both exist or both be absent", dir, certFile, keyFile)
	}
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("CA key does not match the CA certificate")
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate is not a CA (basicConstraints CA:FALSE)")
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key}, nil
}

func createCA(dir, certFile, keyFile, cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// The key goes first: a crash in between leaves only the key, which EnsureCA
	// reports instead of silently making a second CA.
	if err := writeFile(filepath.Join(dir, keyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, certFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key}, nil
}

// Pool returns a certificate pool holding only this CA, for verifying peers.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Issue creates a new key pair and a certificate for it signed by the CA, and returns
// both PEM encoded.
func (ca *CA) Issue(req IssueRequest) (certPEM, keyPEM []byte, err error) {
	if !req.Server && !req.Client {
		return nil, nil, fmt.Errorf("certificate %q: at least one of server or client usage is required", req.CommonName)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key for %q: %w", req.CommonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	validity := req.Validity
	if validity <= 0 {
		validity = leafValidity
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	var usages []x509.ExtKeyUsage
	if req.Server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName, Organization: slices.Clone(req.Organizations)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usages,
		BasicConstraintsValid: true,
		DNSNames:              slices.Clone(req.DNSNames),
		IPAddresses:           slices.Clone(req.IPs),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing certificate for %q: %w", req.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// EnsureServing returns the API server's serving certificate and key from
// dir/apiserver.crt and dir/apiserver.key, issuing new ones when they are missing,
// unreadable, not signed by ca, expiring within 30 days, or when their DNS names or
// IP addresses differ (as sets) from dnsNames and ips.
func EnsureServing(dir string, ca *CA, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	want := IssueRequest{CommonName: "tranche-apiserver", DNSNames: dnsNames, IPs: ips, Server: true}
	return ensureLeaf(dir, ServingCertFile, ServingKeyFile, ca, want, func(c *x509.Certificate) bool {
		return sameStrings(c.DNSNames, dnsNames) && sameIPs(c.IPAddresses, ips)
	})
}

// EnsureClient returns the client certificate and key dir/NAME.crt and dir/NAME.key
// for the user cn in groups orgs (e.g. name "admin", cn "admin", orgs
// ["system:masters"]), issuing new ones when they are missing, unreadable, not signed
// by ca, expiring within 30 days, or name another user or other groups.
func EnsureClient(dir string, ca *CA, name, cn string, orgs []string) (certPEM, keyPEM []byte, err error) {
	if name == "" || filepath.Base(name) != name {
		return nil, nil, fmt.Errorf("client certificate name %q must be a plain file name", name)
	}
	want := IssueRequest{CommonName: cn, Organizations: orgs, Client: true}
	return ensureLeaf(dir, name+".crt", name+".key", ca, want, func(c *x509.Certificate) bool {
		return c.Subject.CommonName == cn && sameStrings(c.Subject.Organization, orgs)
	})
}

// ensureLeaf keeps the pair certFile/keyFile when it is valid for ca, not close to
// expiry and accepted by matches; otherwise it issues want and writes it.
func ensureLeaf(dir, certFile, keyFile string, ca *CA, want IssueRequest, matches func(*x509.Certificate) bool) ([]byte, []byte, error) {
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	if certPEM, keyPEM, ok := loadCurrent(certPath, keyPath, ca, matches); ok {
		return certPEM, keyPEM, nil
	}
	certPEM, keyPEM, err := ca.Issue(want)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// loadCurrent reports whether the pair on disk can be kept. Any read or parse failure
// means "reissue": these files are derived state the CA can always recreate.
func loadCurrent(certPath, keyPath string, ca *CA, matches func(*x509.Certificate) bool) ([]byte, []byte, bool) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, false
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, false
	}
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, nil, false
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil || !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, nil, false
	}
	if cert.CheckSignatureFrom(ca.Cert) != nil {
		return nil, nil, false
	}
	if time.Now().Add(renewBefore).After(cert.NotAfter) || !matches(cert) {
		return nil, nil, false
	}
	return certPEM, keyPEM, true
}

// EnsureSigningKey loads the service account token signing key from dir/sa.key or
// creates it (ECDSA P-256) when missing.
func EnsureSigningKey(dir string) (crypto.Signer, error) {
	path := filepath.Join(dir, SigningKeyFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, err := ParsePrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", path, err)
		}
		return key, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading signing key %s: %w", path, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating signing key: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFile(path, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// ParseCertificate decodes the first PEM CERTIFICATE block of data.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM CERTIFICATE block found")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// ParsePrivateKey decodes the first PEM private key block of data: "PRIVATE KEY"
// (PKCS#8), "EC PRIVATE KEY" (SEC 1) or "RSA PRIVATE KEY" (PKCS#1).
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		switch block.Type {
		case "PRIVATE KEY":
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			signer, ok := key.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("private key of type %T cannot sign", key)
			}
			return signer, nil
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		}
	}
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

// writeFile replaces path atomically (temporary file and rename) so a crash never
// leaves a truncated key or certificate behind.
func writeFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func sameStrings(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func sameIPs(a, b []net.IP) bool {
	norm := func(ips []net.IP) [][]byte {
		out := make([][]byte, 0, len(ips))
		for _, ip := range ips {
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			out = append(out, []byte(ip))
		}
		slices.SortFunc(out, bytes.Compare)
		return slices.CompactFunc(out, bytes.Equal)
	}
	return slices.EqualFunc(norm(a), norm(b), bytes.Equal)
}
