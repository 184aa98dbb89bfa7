package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func makePCR(t *testing.T, mutate func(*certificatesv1.PodCertificateRequest)) *certificatesv1.PodCertificateRequest {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	r := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req-1"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", PodName: "p", PodUID: "12345678-1234-1234-1234-123456789012",
			ServiceAccountName: "default", ServiceAccountUID: "12345678-1234-1234-1234-123456789013", NodeName: "n",
			NodeUID: "12345678-1234-1234-1234-123456789014", StubPKCS10Request: stub}}
	if mutate != nil {
		mutate(r)
	}
	return r
}

func TestPodCertificateRequestStrategy(t *testing.T) {
	res := PodCertificateRequestResource()
	r := makePCR(t, func(r *certificatesv1.PodCertificateRequest) {
		r.Status.CertificateChain = "forged"
	})
	res.PrepareForCreate(r)
	res.Default(r)
	if r.Status.CertificateChain != "" || r.Spec.MaxExpirationSeconds == nil || *r.Spec.MaxExpirationSeconds != 86400 {
		t.Fatalf("after create: status %+v, maxExpirationSeconds %v; want no status and a day", r.Status, r.Spec.MaxExpirationSeconds)
	}
	if errs := res.Validate(r); len(errs) != 0 {
		t.Fatalf("valid request refused: %v", errs)
	}
	for name, tc := range map[string]struct {
		mutate func(*certificatesv1.PodCertificateRequest)
		want   string
	}{
		"too long": {func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.MaxExpirationSeconds = ptr.To[int32](91*86400 + 1)
		}, "spec.maxExpirationSeconds: Invalid value"},
		"no signer": {func(r *certificatesv1.PodCertificateRequest) { r.Spec.SignerName = "" }, "spec.signerName: Required value"},
		"no proof":  {func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = []byte("x") }, "spec.stubPKCS10Request"},
	} {
		t.Run(name, func(t *testing.T) {
			r := makePCR(t, tc.mutate)
			res.Default(r)
			if got := strings.Join(errStrings(res.Validate(r)), "\n"); !strings.Contains(got, tc.want) {
				t.Errorf("errors %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("spec immutable", func(t *testing.T) {
		old := makePCR(t, nil)
		res.Default(old)
		r := old.DeepCopy()
		r.Spec.PodName = "q"
		if got := strings.Join(errStrings(res.ValidateUpdate(r, old)), "\n"); !strings.Contains(got, "spec") {
			t.Errorf("errors %q, want spec immutable", got)
		}
	})
	if state := PodCertificateRequestState(&certificatesv1.PodCertificateRequest{Status: certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue}}}}); state != "Denied" {
		t.Errorf("state %q", state)
	}
}
