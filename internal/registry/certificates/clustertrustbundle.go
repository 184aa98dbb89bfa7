package certificates

import (
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	api "k8s.io/kubernetes/pkg/apis/certificates"
	apiv1 "k8s.io/kubernetes/pkg/apis/certificates/v1"
	certvalidation "k8s.io/kubernetes/pkg/apis/certificates/validation"

	"github.com/tranche/tranche/internal/registry"
)

// ClusterTrustBundleResource serves certificates.k8s.io/v1 clustertrustbundles:
// cluster-scoped, validated by Kubernetes' own rules (a bundle linked to a signer is
// named "<signerName with / as :>:<anything>", an unlinked one has no ":" in its name;
// signerName domain-qualified and immutable; trustBundle one or more distinct PEM
// CERTIFICATE blocks without headers, each an X.509 CA certificate, re-parsed on update
// only when it changed); field selector spec.signerName; the NAME SIGNERNAME table.
// Who may create a bundle for a signer (the attest verb) is ClusterTrustBundleAttest
// admission's to decide, not the strategy's.
func ClusterTrustBundleResource() registry.Resource {
	return registry.Strategy[*certificatesv1.ClusterTrustBundle]{
		Validate: func(b *certificatesv1.ClusterTrustBundle) field.ErrorList {
			return nameAndSpecErrors(certvalidation.ValidateClusterTrustBundle(internalCTB(b), certvalidation.ValidateClusterTrustBundleOptions{}))
		},
		ValidateUpdate: func(b, old *certificatesv1.ClusterTrustBundle) field.ErrorList {
			return nameAndSpecErrors(certvalidation.ValidateClusterTrustBundleUpdate(internalCTB(b), internalCTB(old)))
		},
		Row: func(b *certificatesv1.ClusterTrustBundle, _ time.Time) []interface{} {
			signer := "<none>"
			if b.Spec.SignerName != "" {
				signer = b.Spec.SignerName
			}
			return []interface{}{b.Name, signer}
		},
		Fields: func(b *certificatesv1.ClusterTrustBundle) fields.Set {
			return fields.Set{"spec.signerName": b.Spec.SignerName}
		},
	}.Apply(registry.Resource{
		GVK:      certificatesv1.SchemeGroupVersion.WithKind("ClusterTrustBundle"),
		Plural:   "clustertrustbundles",
		Singular: "clustertrustbundle",
		New:      func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
		NewList:  func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
		// The name's rule depends on spec.signerName: Validate checks it.
		NameValidation: func(string, bool) []string { return nil },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "SignerName", Type: "string", Description: certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]},
		},
	})
}

// internalCTB converts a bundle for Kubernetes' validation.
func internalCTB(b *certificatesv1.ClusterTrustBundle) *api.ClusterTrustBundle {
	out := &api.ClusterTrustBundle{}
	if err := apiv1.Convert_v1_ClusterTrustBundle_To_certificates_ClusterTrustBundle(b, out, nil); err != nil {
		panic(fmt.Sprintf("converting ClusterTrustBundle %s: %v", b.Name, err))
	}
	return out
}

// nameAndSpecErrors keeps, of Kubernetes' errors, those about metadata.name and outside
// metadata: the API server checks the rest of metadata itself.
func nameAndSpecErrors(errs field.ErrorList) field.ErrorList {
	out := registry.WithoutMetadata(errs)
	for _, e := range errs {
		if e.Field == "metadata.name" {
			out = append(field.ErrorList{e}, out...)
		}
	}
	return out
}
