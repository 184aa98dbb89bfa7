package server

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/apiserver"
)

var ctbResource = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "clustertrustbundles"}

// ctbAttest is kube-apiserver's ClusterTrustBundleAttest admission: a
// ClusterTrustBundle linked to a signer (spec.signerName set) may be created or
// changed only by a user with the "attest" verb on that signer (certificates.k8s.io
// signers, by name or "domain/*"); an update that only changes ownerReferences or
// finalizers is not checked, so that garbage collection and storage migration work.
type ctbAttest struct{ sec *security }

var _ apiserver.Validator = ctbAttest{}

// Validate implements apiserver.Validator.
func (c ctbAttest) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	if req.Resource.GroupResource() != ctbResource {
		return nil, nil
	}
	b, ok := req.Object.(*certificatesv1.ClusterTrustBundle)
	if !ok || b.Spec.SignerName == "" {
		return nil, nil
	}
	if req.Operation == apiserver.AdmitUpdate && onlyGCFieldsChanged(req.Object, req.OldObject) {
		return nil, nil
	}
	if !(csrAdmission{sec: c.sec}).authorizedForSigner(ctx, userFrom(ctx), "attest", b.Spec.SignerName) {
		return nil, apierrors.NewForbidden(ctbResource, req.Name, fmt.Errorf("user not permitted to attest for signerName %q", b.Spec.SignerName))
	}
	return nil, nil
}
