package volumes

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// signerFixture answers PodCertificateRequests as a signer would: every created
// request gets a name and, unless deny is set, is issued at once with chain.
func signerFixture(t *testing.T, deny bool) (*fixture, *[]*certificatesv1.PodCertificateRequest, string) {
	t.Helper()
	chain, _ := caPEM(t, "leaf")
	f := newFixture(t,
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default", UID: "sa-uid"}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid"}},
	)
	var created []*certificatesv1.PodCertificateRequest
	f.client.PrependReactor("create", "podcertificaterequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
		r := a.(clienttesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		r.Name = r.GenerateName + string(rune('a'+len(created)))
		cond := metav1.Condition{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Signed"}
		if deny {
			cond = metav1.Condition{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue, Reason: "Nope", Message: "not you"}
		} else {
			r.Status.CertificateChain = "junk before\n" + chain
			r.Status.BeginRefreshAt = ptr.To(metav1.NewTime(t0.Add(3600e9)))
		}
		r.Status.Conditions = []metav1.Condition{cond}
		created = append(created, r.DeepCopy())
		return false, nil, nil
	})
	return f, &created, chain
}

func TestPodCertificateFiles(t *testing.T) {
	f, created, chain := signerFixture(t, false)
	pod := makePod(func(p *v1.Pod) { p.Spec.ServiceAccountName = "default" })
	proj := &v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "bundle.pem",
		KeyPath: "key.pem", CertificateChainPath: "chain.pem", MaxExpirationSeconds: ptr.To[int32](3600), UserAnnotations: map[string]string{"a": "b"}}
	files, err := f.m.podCertificateFiles(context.Background(), pod, proj, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if len(*created) != 1 {
		t.Fatalf("%d requests, want 1", len(*created))
	}
	r := (*created)[0]
	want := certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", PodName: "web", PodUID: "uid-1", ServiceAccountName: "default",
		ServiceAccountUID: "sa-uid", NodeName: "node-a", NodeUID: "node-uid", MaxExpirationSeconds: ptr.To[int32](3600),
		StubPKCS10Request: r.Spec.StubPKCS10Request, UnverifiedUserAnnotations: map[string]string{"a": "b"}}
	if got := r.Spec; got.String() != want.String() || r.Namespace != "ns" || len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("request %+v\nwant spec %+v owned by the pod", r, want)
	}
	stub, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil || stub.CheckSignature() != nil {
		t.Fatalf("stub request: %v", err)
	}
	keyBlock, _ := pem.Decode(files["key.pem"].Data)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		t.Fatalf("key.pem: %q", files["key.pem"].Data)
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(key.(crypto.Signer).Public())
	stubPub, _ := x509.MarshalPKIXPublicKey(stub.PublicKey)
	if !bytes.Equal(pub, stubPub) {
		t.Error("the stub request is not signed by the projected key")
	}
	if string(files["chain.pem"].Data) != chain {
		t.Errorf("chain.pem %q, want the chain without the text around it", files["chain.pem"].Data)
	}
	if string(files["bundle.pem"].Data) != string(files["key.pem"].Data)+chain || files["bundle.pem"].Mode != 0o644 {
		t.Errorf("bundle.pem is not key then chain")
	}
	again, err := f.m.podCertificateFiles(context.Background(), pod, proj, 0o644)
	if err != nil || len(*created) != 1 || string(again["key.pem"].Data) != string(files["key.pem"].Data) {
		t.Errorf("a second sync before beginRefreshAt requested again (%d requests, %v)", len(*created), err)
	}
	f.clock.Step(3601e9)
	if _, err := f.m.podCertificateFiles(context.Background(), pod, proj, 0o644); err != nil || len(*created) != 2 {
		t.Errorf("after beginRefreshAt: %d requests, %v; want a new request", len(*created), err)
	}
	f.m.podCerts.forget(pod.UID)
	if len(f.m.podCerts.entries) != 0 {
		t.Errorf("forget left %d entries", len(f.m.podCerts.entries))
	}
}

func TestPodCertificateDenied(t *testing.T) {
	f, created, _ := signerFixture(t, true)
	pod := makePod(func(p *v1.Pod) { p.Spec.ServiceAccountName = "default" })
	proj := &v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "bundle.pem"}
	_, err := f.m.podCertificateFiles(context.Background(), pod, proj, 0o644)
	if err == nil || !strings.Contains(err.Error(), "PodCertificateRequest ns/req-a was Denied: Nope: not you") {
		t.Fatalf("error %v, want the denial", err)
	}
	if _, err := f.m.podCertificateFiles(context.Background(), pod, proj, 0o644); err == nil || len(*created) != 2 {
		t.Errorf("after a denial the next sync must request again: %d requests", len(*created))
	}
}
