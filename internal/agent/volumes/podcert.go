package volumes

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podCertWait bounds how long one Prepare waits for a signer to answer a new
// PodCertificateRequest; a request still pending after it fails the mount, which the
// agent retries on the pod's next sync, still waiting for the same request.
const (
	podCertWait = 20 * time.Second
	podCertPoll = 250 * time.Millisecond
)

// podCertCache holds the credentials of podCertificate projections by pod and
// projection, as kubelet's pod certificate manager does: the private key never leaves
// the node, and a certificate is requested again only once its beginRefreshAt has
// passed. The zero value is ready to use.
type podCertCache struct {
	mu      sync.Mutex
	entries map[podCertKey]*podCertEntry
}

// podCertKey is a pod and one projection (its JSON), so two identical projections of a
// pod share their credentials.
type podCertKey struct {
	pod  types.UID
	spec string
}

// podCertEntry is one projection's credentials: the issued key and chain, and the
// request in flight with its key.
type podCertEntry struct {
	keyPEM, chainPEM []byte
	refreshAt        time.Time
	pending          string // name of the request awaiting its signer
	pendingKey       []byte
}

// forget drops the credentials of a pod.
func (c *podCertCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.pod == uid {
			delete(c.entries, k)
		}
	}
}

// podCertificateFiles returns the files of a podCertificate projection: at
// credentialBundlePath the PKCS#8 private key followed by the certificate chain, at
// keyPath the key, at certificateChainPath the chain. Without credentials yet (or past
// their beginRefreshAt) it generates a key of p.KeyType and creates a
// PodCertificateRequest for the pod, its service account and this node, with a stub
// PKCS#10 request proving possession of the key, then waits for the signer; a denied
// or failed request is an error, and the next sync asks again.
func (m *Manager) podCertificateFiles(ctx context.Context, pod *v1.Pod, p *v1.PodCertificateProjection, mode int32) (map[string]fileProjection, error) {
	spec, _ := json.Marshal(p)
	key := podCertKey{pod: pod.UID, spec: string(spec)}
	c := &m.podCerts
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[podCertKey]*podCertEntry{}
	}
	e := c.entries[key]
	if e == nil {
		e = &podCertEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()

	now := m.clock.Now()
	if e.chainPEM == nil || !now.Before(e.refreshAt) {
		if e.pending == "" {
			if err := m.requestPodCertificate(ctx, pod, p, e); err != nil {
				return nil, err
			}
		}
		if err := m.awaitPodCertificate(ctx, pod.Namespace, e); err != nil && e.chainPEM == nil {
			return nil, err
		}
	}
	files := map[string]fileProjection{}
	if p.CredentialBundlePath != "" {
		files[p.CredentialBundlePath] = fileProjection{Data: append(append([]byte{}, e.keyPEM...), e.chainPEM...), Mode: mode}
	}
	if p.KeyPath != "" {
		files[p.KeyPath] = fileProjection{Data: e.keyPEM, Mode: mode}
	}
	if p.CertificateChainPath != "" {
		files[p.CertificateChainPath] = fileProjection{Data: e.chainPEM, Mode: mode}
	}
	return files, nil
}

// requestPodCertificate generates a key and creates the request for it, recording
// both in e as pending.
func (m *Manager) requestPodCertificate(ctx context.Context, pod *v1.Pod, p *v1.PodCertificateProjection, e *podCertEntry) error {
	sa, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("while getting service account for pod certificate: %w", err)
	}
	node, err := m.client.CoreV1().Nodes().Get(ctx, m.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("while getting node for pod certificate: %w", err)
	}
	priv, stub, err := podCertKeyAndProof(p.KeyType)
	if err != nil {
		return fmt.Errorf("while generating keypair: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	req := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: p.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: sa.Name, ServiceAccountUID: sa.UID, NodeName: types.NodeName(node.Name), NodeUID: node.UID,
			MaxExpirationSeconds: p.MaxExpirationSeconds, StubPKCS10Request: stub, UnverifiedUserAnnotations: p.UserAnnotations,
		},
	}
	created, err := m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("while creating PodCertificateRequest: %w", err)
	}
	m.log.Info("requested pod certificate", "pod", pod.Namespace+"/"+pod.Name, "request", created.Name, "signer", p.SignerName)
	e.pending, e.pendingKey = created.Name, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return nil
}

// awaitPodCertificate polls e's pending request for up to podCertWait and, once it is
// issued, makes its chain and key e's credentials.
func (m *Manager) awaitPodCertificate(ctx context.Context, ns string, e *podCertEntry) error {
	deadline := m.clock.Now().Add(podCertWait)
	for {
		r, err := m.client.CertificatesV1().PodCertificateRequests(ns).Get(ctx, e.pending, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("while getting PodCertificateRequest %s: %w", e.pending, err)
		}
		for _, c := range r.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				continue
			}
			switch c.Type {
			case certificatesv1.PodCertificateRequestConditionTypeIssued:
				e.keyPEM, e.chainPEM = e.pendingKey, cleanChain([]byte(r.Status.CertificateChain))
				e.refreshAt = m.clock.Now().Add(time.Hour)
				if r.Status.BeginRefreshAt != nil {
					e.refreshAt = r.Status.BeginRefreshAt.Time
				}
				e.pending, e.pendingKey = "", nil
				return nil
			case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
				name := e.pending
				e.pending, e.pendingKey = "", nil
				return fmt.Errorf("PodCertificateRequest %s/%s was %s: %s: %s", ns, name, c.Type, c.Reason, c.Message)
			}
		}
		if !m.clock.Now().Before(deadline) {
			return fmt.Errorf("PodCertificateRequest %s/%s is not issued yet", ns, e.pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.clock.After(podCertPoll):
		}
	}
}

// cleanChain keeps only the PEM blocks of a chain, without headers or text between.
func cleanChain(in []byte) []byte {
	var out []byte
	for {
		var b *pem.Block
		b, in = pem.Decode(in)
		if b == nil {
			return out
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
	}
}

// podCertKeyAndProof generates a private key of keyType and a stub PKCS#10 request
// signed by it.
func podCertKeyAndProof(keyType string) (crypto.Signer, []byte, error) {
	var priv crypto.Signer
	var err error
	switch keyType {
	case "RSA3072":
		priv, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		priv, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		priv, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, err
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return priv, stub, nil
}
