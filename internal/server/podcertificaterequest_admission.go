package server

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authz"
)

var (
	pcrResource = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "podcertificaterequests"}
	pcrKind     = certificatesv1.SchemeGroupVersion.WithKind("PodCertificateRequest").GroupKind()
)

// pcrAdmission is what kube-apiserver checks on PodCertificateRequests beyond their
// validation: a status write that changes status needs the "sign" verb on the
// request's signer (by name or "domain/*"), refused as kube-apiserver's status
// strategy refuses it (422, spec.signerName Forbidden); and a node (NodeRestriction)
// may create requests only in its own name.
type pcrAdmission struct{ sec *security }

var _ apiserver.Validator = pcrAdmission{}

// Validate implements apiserver.Validator.
func (p pcrAdmission) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	if req.Resource.GroupResource() != pcrResource {
		return nil, nil
	}
	r, ok := req.Object.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return nil, nil
	}
	user := userFrom(ctx)
	switch {
	case req.Operation == apiserver.AdmitCreate && req.Subresource == "":
		if node, isNode := authz.NodeName(user); isNode && string(r.Spec.NodeName) != node {
			return nil, apierrors.NewForbidden(pcrResource, req.Name,
				fmt.Errorf("node %q is not permitted to create PodCertificateRequests naming node %q", node, r.Spec.NodeName))
		}
	case req.Operation == apiserver.AdmitUpdate && req.Subresource == "status":
		old, ok := req.OldObject.(*certificatesv1.PodCertificateRequest)
		if !ok || apiequality.Semantic.DeepEqual(old.Status, r.Status) {
			return nil, nil
		}
		if !(csrAdmission{sec: p.sec}).authorizedForSigner(ctx, user, "sign", old.Spec.SignerName) {
			name := ""
			if user != nil {
				name = user.Name
			}
			return nil, apierrors.NewInvalid(pcrKind, req.Name, field.ErrorList{field.Forbidden(field.NewPath("spec", "signerName"),
				fmt.Sprintf("User %q is not permitted to \"sign\" for signer %q", name, old.Spec.SignerName))})
		}
	}
	return nil, nil
}
