package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pemCA returns a self-signed CA certificate in PEM.
func pemCA(t *testing.T, cn string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: created, NotAfter: created.Add(24 * 365 * 3600e9),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func makeCTB(name, signer, bundle string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
}

func TestValidateClusterTrustBundle(t *testing.T) {
	r := ClusterTrustBundleResource()
	ca1, ca2 := pemCA(t, "one"), pemCA(t, "two")
	tests := []struct {
		name string
		ctb  *certificatesv1.ClusterTrustBundle
		want []string
	}{
		{name: "unlinked", ctb: makeCTB("plain", "", ca1+ca2)},
		{name: "linked", ctb: makeCTB("example.com:signer:abc", "example.com/signer", ca1)},
		{name: "linked without prefix", ctb: makeCTB("abc", "example.com/signer", ca1),
			want: []string{`metadata.name: Invalid value: "abc": ClusterTrustBundle for signerName example.com/signer must be named with prefix example.com:signer:`}},
		{name: "unlinked with colon", ctb: makeCTB("a:b", "", ca1),
			want: []string{`metadata.name: Invalid value: "a:b": ClusterTrustBundle without signer name must not have ":" in its name`}},
		{name: "bad signer", ctb: makeCTB("example:x", "example", ca1),
			want: []string{`spec.signerName: Invalid value: "example": must be a fully qualified domain and path of the form 'example.com/signer-name'`}},
		{name: "no anchors", ctb: makeCTB("plain", "", ""),
			want: []string{`spec.trustBundle: Invalid value: "<value omitted>": at least one trust anchor must be provided`}},
		{name: "duplicate", ctb: makeCTB("plain", "", ca1+ca1),
			want: []string{`spec.trustBundle: Invalid value: "<value omitted>": duplicate trust anchor (indices [0 1])`}},
		{name: "not a CA", ctb: makeCTB("plain", "", string(pemCertificate(t))),
			want: []string{`spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set`}},
		{name: "other block", ctb: makeCTB("plain", "", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
			want: []string{`spec.trustBundle: Invalid value: "<value omitted>": entry 0 has bad block type: PRIVATE KEY`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Validate(tc.ctb))
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d: %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
	t.Run("signerName immutable", func(t *testing.T) {
		old := makeCTB("example.com:signer:abc", "example.com/signer", ca1)
		b := old.DeepCopy()
		b.Spec.SignerName = "example.com/other"
		got := strings.Join(errStrings(r.ValidateUpdate(b, old)), "\n")
		if !strings.Contains(got, "spec.signerName: Invalid value: \"example.com/other\": field is immutable") {
			t.Errorf("got %q", got)
		}
	})
}
