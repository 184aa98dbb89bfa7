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
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

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

// TestCSRAdmissionGuardsLiveNodes: a bootstrap token may request the client certificate
// of a new node or of one that is not Ready, not of a registered Ready node; other
// requesters and signers are not concerned.
func TestCSRAdmissionGuardsLiveNodes(t *testing.T) {
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, ready := range map[string]v1.ConditionStatus{"live": v1.ConditionTrue, "dead": v1.ConditionUnknown} {
		nodes.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}}}})
	}
	sec := &security{}
	sec.caches.Store(&listers{nodes: corelisters.NewNodeLister(nodes)})
	adm := csrAdmission{sec: sec}
	gvr := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	token := &authn.User{Name: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"}}
	admin := &authn.User{Name: "admin", Groups: []string{"system:masters"}}
	request := func(cn string) []byte {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	for _, tc := range []struct {
		name   string
		user   *authn.User
		node   string
		signer string
		want   string
	}{
		{name: "new node", user: token, node: "new", signer: certificatesv1.KubeAPIServerClientKubeletSignerName},
		{name: "node not Ready", user: token, node: "dead", signer: certificatesv1.KubeAPIServerClientKubeletSignerName},
		{name: "Ready node", user: token, node: "live", signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
			want: `node "live" is registered and Ready: a bootstrap token may not take over a live node's identity`},
		{name: "Ready node, not a token", user: admin, node: "live", signer: certificatesv1.KubeAPIServerClientKubeletSignerName},
		{name: "Ready node, another signer", user: token, node: "live", signer: "example.com/other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.WithValue(context.Background(), userKey{}, tc.user)
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: tc.signer, Request: request("system:node:" + tc.node)}}
			err := adm.Mutate(ctx, &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate, Resource: gvr, Name: "node-csr", Object: csr})
			if tc.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != "" && (err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want 403 %q", err, tc.want)
			}
		})
	}
}
