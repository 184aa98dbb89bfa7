package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

// signerAuthorizer allows verb on the named signers only.
type signerAuthorizer map[string]bool

func (s signerAuthorizer) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	if a.Resource == "signers" && s[a.Verb+" "+a.Name] {
		return authz.Allow, "", nil
	}
	return authz.NoOpinion, "", nil
}

func csrRequest(t *testing.T, orgs ...string) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x", Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCSRAdmission(t *testing.T) {
	adm := csrAdmission{sec: &security{authorizer: signerAuthorizer{"approve example.com/*": true, "sign example.com/one": true}}}
	user := &authn.User{Name: "bob", UID: "u-1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"a"}}}
	ctx := context.WithValue(context.Background(), userKey{}, user)
	gvr := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	csr := func(signer string, orgs ...string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: signer, Request: csrRequest(t, orgs...), Username: "forged", Groups: []string{"system:masters"}}}
	}

	created := csr("example.com/one")
	if err := adm.Mutate(ctx, &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate, Resource: gvr, Name: "c", Object: created}); err != nil {
		t.Fatal(err)
	}
	if created.Spec.Username != "bob" || created.Spec.UID != "u-1" || strings.Join(created.Spec.Groups, ",") != "devs" || created.Spec.Extra["scopes"][0] != "a" {
		t.Errorf("requester not written: %+v", created.Spec)
	}
	err := adm.Mutate(ctx, &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate, Resource: gvr, Name: "m",
		Object: csr(certificatesv1.KubeAPIServerClientSignerName, "system:masters")})
	if err == nil || !strings.Contains(err.Error(), "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed") {
		t.Errorf("system:masters client certificate: %v", err)
	}

	for _, tc := range []struct {
		sub, signer, certificate string
		wantErr                  string
	}{
		{sub: "approval", signer: "example.com/two"},
		{sub: "approval", signer: "other.com/x", wantErr: `user not permitted to approve requests with signerName "other.com/x"`},
		{sub: "status", signer: "example.com/one", certificate: "x"},
		{sub: "status", signer: "example.com/two", certificate: "x", wantErr: `user not permitted to sign requests with signerName "example.com/two"`},
		{sub: "status", signer: "example.com/two"},
	} {
		old := csr(tc.signer)
		obj := old.DeepCopy()
		if tc.certificate != "" {
			obj.Status.Certificate = []byte(tc.certificate)
		}
		err := adm.Mutate(ctx, &apiserver.AdmissionRequest{Operation: apiserver.AdmitUpdate, Resource: gvr, Subresource: tc.sub, Name: "c", Object: obj, OldObject: old})
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s of %s: %v, want %q", tc.sub, tc.signer, err, tc.wantErr)
		}
	}
}
