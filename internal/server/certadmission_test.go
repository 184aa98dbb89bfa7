package server

import (
	"context"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
)

func TestClusterTrustBundleAttest(t *testing.T) {
	adm := ctbAttest{sec: &security{authorizer: signerAuthorizer{"attest example.com/*": true}}}
	ctx := context.WithValue(context.Background(), userKey{}, &authn.User{Name: "bob"})
	gvr := certificatesv1.SchemeGroupVersion.WithResource("clustertrustbundles")
	ctb := func(signer string, owners ...string) *certificatesv1.ClusterTrustBundle {
		b := &certificatesv1.ClusterTrustBundle{Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: "pem"}}
		for _, o := range owners {
			b.OwnerReferences = append(b.OwnerReferences, metav1.OwnerReference{Name: o})
		}
		return b
	}
	tests := []struct {
		name     string
		op       apiserver.AdmitOp
		obj, old *certificatesv1.ClusterTrustBundle
		want     string
	}{
		{name: "unlinked", obj: ctb("")},
		{name: "attest by domain wildcard", obj: ctb("example.com/a")},
		{name: "no attest", obj: ctb("other.io/a"), want: `clustertrustbundles.certificates.k8s.io "b" is forbidden: user not permitted to attest for signerName "other.io/a"`},
		{name: "owner change only", op: apiserver.AdmitUpdate, obj: ctb("other.io/a", "x"), old: ctb("other.io/a")},
		{name: "bundle change", op: apiserver.AdmitUpdate, obj: &certificatesv1.ClusterTrustBundle{Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "other.io/a", TrustBundle: "new"}},
			old: ctb("other.io/a"), want: "user not permitted to attest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &apiserver.AdmissionRequest{Operation: tc.op, Resource: gvr, Name: "b", Object: tc.obj}
			if tc.old != nil {
				req.OldObject = tc.old
			}
			_, err := adm.Validate(ctx, req)
			if got := errString(err); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPodCertificateRequestAdmission(t *testing.T) {
	adm := pcrAdmission{sec: &security{authorizer: signerAuthorizer{"sign example.com/s": true}}}
	gvr := certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")
	pcr := func(node string, conds ...string) *certificatesv1.PodCertificateRequest {
		r := &certificatesv1.PodCertificateRequest{Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", NodeName: "node-a"}}
		if node != "" {
			r.Spec.NodeName = "node-b"
		}
		for _, c := range conds {
			r.Status.Conditions = append(r.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
		}
		return r
	}
	other := pcr("")
	other.Spec.SignerName = "example.com/t"
	issued := other.DeepCopy()
	issued.Status.Conditions = []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue}}
	nodeA := &authn.User{Name: authn.NodeUserPrefix + "node-a", Groups: []string{authn.GroupNodes}}
	bob := &authn.User{Name: "bob"}
	tests := []struct {
		name     string
		user     *authn.User
		op       apiserver.AdmitOp
		sub      string
		obj, old *certificatesv1.PodCertificateRequest
		want     string
	}{
		{name: "node for itself", user: nodeA, obj: pcr("")},
		{name: "node for another", user: nodeA, obj: pcr("b"), want: `node "node-a" is not permitted to create PodCertificateRequests naming node "node-b"`},
		{name: "admin for any node", user: bob, obj: pcr("b")},
		{name: "signer issues", user: bob, op: apiserver.AdmitUpdate, sub: "status", obj: pcr("", "Issued"), old: pcr("")},
		{name: "non-signer issues", user: bob, op: apiserver.AdmitUpdate, sub: "status", obj: issued, old: other,
			want: `PodCertificateRequest.certificates.k8s.io "r" is invalid: spec.signerName: Forbidden: User "bob" is not permitted to "sign" for signer "example.com/t"`},
		{name: "status unchanged", user: bob, op: apiserver.AdmitUpdate, sub: "status", obj: other.DeepCopy(), old: other},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.WithValue(context.Background(), userKey{}, tc.user)
			req := &apiserver.AdmissionRequest{Operation: tc.op, Resource: gvr, Subresource: tc.sub, Name: "r", Object: tc.obj}
			if tc.old != nil {
				req.OldObject = tc.old
			}
			_, err := adm.Validate(ctx, req)
			if got := errString(err); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
