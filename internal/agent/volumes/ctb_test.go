package volumes

import (
	"context"
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
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// caPEM returns a self-signed CA certificate in PEM and its DER bytes.
func caPEM(t *testing.T, cn string) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: t0, NotAfter: t0.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(der)
}

// pemDERs returns the DER bytes of every PEM block in data.
func pemDERs(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			t.Errorf("block type %q", b.Type)
		}
		out[string(b.Bytes)] = true
	}
	return out
}

func TestClusterTrustBundleFiles(t *testing.T) {
	pemA, derA := caPEM(t, "a")
	pemB, derB := caPEM(t, "b")
	pemC, derC := caPEM(t, "c")
	ctb := func(name, signer string, lbls map[string]string, bundle string) runtime.Object {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
	}
	f := newFixture(t,
		ctb("plain", "", nil, pemA+pemB),
		ctb("example.com:s:1", "example.com/s", map[string]string{"team": "x"}, pemA),
		ctb("example.com:s:2", "example.com/s", map[string]string{"team": "x"}, pemB+pemA),
		ctb("example.com:s:3", "example.com/s", map[string]string{"team": "y"}, pemC),
		ctb("example.com:t:1", "example.com/t", map[string]string{"team": "x"}, pemC),
	)
	bySigner := func(signer string, sel *metav1.LabelSelector, optional bool) *v1.ClusterTrustBundleProjection {
		return &v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), LabelSelector: sel, Optional: ptr.To(optional), Path: "ca.pem"}
	}
	cases := []struct {
		name    string
		p       *v1.ClusterTrustBundleProjection
		want    []string // DERs expected in the file
		wantErr string
	}{
		{name: "by name", p: &v1.ClusterTrustBundleProjection{Name: ptr.To("plain"), Path: "ca.pem"}, want: []string{derA, derB}},
		{name: "missing name", p: &v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Path: "ca.pem"},
			wantErr: `while getting ClusterTrustBundle: clustertrustbundles.certificates.k8s.io "nope" not found`},
		{name: "missing name optional", p: &v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Optional: ptr.To(true), Path: "ca.pem"}},
		{name: "signer and selector combine and deduplicate",
			p: bySigner("example.com/s", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}, false), want: []string{derA, derB}},
		{name: "empty selector matches all of the signer", p: bySigner("example.com/s", &metav1.LabelSelector{}, false), want: []string{derA, derB, derC}},
		{name: "nil selector matches nothing", p: bySigner("example.com/s", nil, false),
			wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{name: "nothing matched optional", p: bySigner("example.com/none", &metav1.LabelSelector{}, true)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files, err := f.m.clusterTrustBundleFiles(context.Background(), tc.p, 0o644)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			file, ok := files["ca.pem"]
			if !ok || len(files) != 1 || file.Mode != 0o644 {
				t.Fatalf("files %v, want ca.pem alone with mode 0644", files)
			}
			got := pemDERs(t, file.Data)
			if len(got) != len(tc.want) || strings.Count(string(file.Data), "BEGIN CERTIFICATE") != len(tc.want) {
				t.Errorf("%d anchors (%d blocks), want %d", len(got), strings.Count(string(file.Data), "BEGIN"), len(tc.want))
			}
			for _, d := range tc.want {
				if !got[d] {
					t.Errorf("an expected anchor is missing")
				}
			}
		})
	}
}
