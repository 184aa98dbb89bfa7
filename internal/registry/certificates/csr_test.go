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
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func pemRequest(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "e2e.example.com"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func pemCertificate(t *testing.T) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e"}, NotBefore: created, NotAfter: created.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func makeCSR(t *testing.T, mutate func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-example-csr-x", CreationTimestamp: metav1.NewTime(created)},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pemRequest(t), SignerName: "example.com/e2e", Username: "alice",
			ExpirationSeconds: new(int32(3600)),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}},
	}
	if mutate != nil {
		mutate(csr)
	}
	return csr
}

func approved(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "OK"})
}

func TestValidateCSR(t *testing.T) {
	r := CertificateSigningRequestResource()
	tests := []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		want   []string
	}{
		{name: "conformance template"},
		{name: "not PEM", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") },
			want: []string{`spec.request: Invalid value: "aGVsbG8=": PEM block type must be CERTIFICATE REQUEST`}},
		{name: "usages", mutate: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{"server auth", "server auth", "flying"}
		}, want: []string{`spec.usages[1]: Duplicate value: "server auth"`, `spec.usages[2]: Unsupported value: "flying": supported values: `}},
		{name: "no usages", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil },
			want: []string{"spec.usages: Required value"}},
		{name: "signer without path", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" },
			want: []string{`spec.signerName: Invalid value: "example.com": must be a fully qualified domain and path of the form 'example.com/signer-name'`}},
		{name: "signer with one-label domain", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example/e2e" },
			want: []string{`spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots`}},
		{name: "signer with a bad label", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "Example.com/e2e" },
			want: []string{`spec.signerName: Invalid value: "Example.com": validating label "Example": a lowercase RFC 1123 label must consist of`}},
		{name: "no signer", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" },
			want: []string{"spec.signerName: Required value"}},
		{name: "legacy signer", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" },
			want: []string{`spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`}},
		{name: "short expiration", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = new(int32(60)) },
			want: []string{"spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Validate(makeCSR(t, tc.mutate)))
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
}

func TestCSRSubresources(t *testing.T) {
	r := CertificateSigningRequestResource()
	approval, status := r.Subresources["approval"], r.Subresources["status"]
	if approval == nil || status == nil || r.Status != nil {
		t.Fatal("approval and status are served as parts of the object")
	}
	old := makeCSR(t, nil)
	r.PrepareForCreate(old)

	// Approval writes conditions only, and keeps the request's metadata.
	in := makeCSR(t, func(c *certificatesv1.CertificateSigningRequest) {
		c.Annotations = map[string]string{"patchedapproval": "true"}
		c.Spec.Username = "mallory"
		c.Status.Certificate = pemCertificate(t)
		approved(c)
	})
	approval.PrepareForUpdate(in, old)
	if in.Spec.Username != "alice" || len(in.Status.Certificate) != 0 || in.Annotations["patchedapproval"] != "true" ||
		len(in.Status.Conditions) != 1 || in.Status.Conditions[0].LastUpdateTime.IsZero() {
		t.Fatalf("approval write: %+v", in)
	}
	if errs := approval.ValidateUpdate(in, old); len(errs) != 0 {
		t.Fatalf("approval: %v", errs)
	}
	// Approved and Denied together are refused.
	both := in.DeepCopy()
	both.Status.Conditions = append(both.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue})
	if got := errStrings(approval.ValidateUpdate(both, old)); len(got) != 1 || !strings.Contains(got[0], "Approved and Denied conditions are mutually exclusive") {
		t.Errorf("approved and denied: %q", got)
	}
	// A status write cannot approve, nor can an object write.
	if got := errStrings(status.ValidateUpdate(in, old)); len(got) != 1 || got[0] != `status.conditions: Forbidden: updates may not add a condition of type "Approved"` {
		t.Errorf("approving through status: %q", got)
	}
	// An approval cannot be taken back.
	if got := errStrings(approval.ValidateUpdate(old, in)); len(got) != 1 || got[0] != `status.conditions: Forbidden: updates may not remove a condition of type "Approved"` {
		t.Errorf("removing an approval: %q", got)
	}

	// Status sets the certificate once, keeping Approved as stored.
	issued := in.DeepCopy()
	issued.Status.Certificate = pemCertificate(t)
	issued.Status.Conditions[0].Reason = "Changed"
	status.PrepareForUpdate(issued, in)
	if issued.Status.Conditions[0].Reason != "OK" {
		t.Error("status write changed the Approved condition")
	}
	if errs := status.ValidateUpdate(issued, in); len(errs) != 0 {
		t.Fatalf("issuing: %v", errs)
	}
	again := issued.DeepCopy()
	again.Status.Certificate = pemCertificate(t)
	if got := errStrings(status.ValidateUpdate(again, issued)); len(got) != 1 || got[0] != "status.certificate: Forbidden: updates may not modify existing certificate content" {
		t.Errorf("reissuing: %q", got)
	}
	bad := in.DeepCopy()
	bad.Status.Certificate = []byte("junk")
	if got := errStrings(status.ValidateUpdate(bad, in)); len(got) != 1 || got[0] != `status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block` {
		t.Errorf("junk certificate: %q", got)
	}

	// An object write keeps spec and status.
	write := makeCSR(t, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "other.com/x"; approved(c) })
	r.PrepareForUpdate(write, old)
	if write.Spec.SignerName != "example.com/e2e" || len(write.Status.Conditions) != 0 {
		t.Errorf("object write changed spec or status: %+v", write)
	}
}

func TestCSRTableAndFields(t *testing.T) {
	r := CertificateSigningRequestResource()
	csr := makeCSR(t, approved)
	if diff := cmp.Diff([]interface{}{"e2e-example-csr-x", "5m", "example.com/e2e", "alice", "60m", "Approved"}, r.Row(csr, created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	csr.Status.Certificate = pemCertificate(t)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue})
	if got := Condition(csr); got != "Approved,Failed,Issued" {
		t.Errorf("condition %q", got)
	}
	if got := r.Fields(csr)["spec.signerName"]; got != "example.com/e2e" {
		t.Errorf("spec.signerName field %q", got)
	}
	if len(r.NameValidation("Any Name: at all", false)) != 0 {
		t.Error("CSR names are free-form")
	}
}
