package certificates

import (
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	api "k8s.io/kubernetes/pkg/apis/certificates"
	apiv1 "k8s.io/kubernetes/pkg/apis/certificates/v1"
	certvalidation "k8s.io/kubernetes/pkg/apis/certificates/validation"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/registry"
)

// PodCertificateRequestResource serves certificates.k8s.io/v1 podcertificaterequests:
// namespaced, maxExpirationSeconds defaulted to a day, spec immutable and validated by Kubernetes' own rules (a domain-qualified
// signerName, pod, service account and node named with their uids,
// maxExpirationSeconds within bounds, a stub PKCS#10 request that proves possession of
// a supported key, userAnnotations), status empty on create and written only through
// the status subresource, where a signer issues (a certificate chain for the request's
// key with notBefore, notAfter and beginRefreshAt matching it), denies or fails the
// request once, checked by Kubernetes' status validation at the server's clock; field
// selectors spec.signerName, spec.podName and spec.nodeName; kube-apiserver's table.
// Who may write status (the sign verb on the signer) is admission's to decide.
func PodCertificateRequestResource() registry.Resource {
	specDesc := certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()
	return registry.Strategy[*certificatesv1.PodCertificateRequest]{
		PrepareForCreate: func(r *certificatesv1.PodCertificateRequest) {
			r.Status = certificatesv1.PodCertificateRequestStatus{}
		},
		Default: apiv1.SetObjectDefaults_PodCertificateRequest,
		Validate: func(r *certificatesv1.PodCertificateRequest) field.ErrorList {
			return registry.WithoutMetadata(certvalidation.ValidatePodCertificateRequestCreate(internalPCR(r)))
		},
		ValidateUpdate: func(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
			return registry.WithoutMetadata(certvalidation.ValidatePodCertificateRequestUpdate(internalPCR(r), internalPCR(old)))
		},
		StatusValidateUpdate: func(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
			return registry.WithoutMetadata(certvalidation.ValidatePodCertificateRequestStatusUpdate(internalPCR(r), internalPCR(old), clock.RealClock{}))
		},
		Row: func(r *certificatesv1.PodCertificateRequest, _ time.Time) []interface{} {
			return []interface{}{r.Name, r.Spec.PodName, r.Spec.ServiceAccountName, string(r.Spec.NodeName), r.Spec.SignerName, PodCertificateRequestState(r),
				formatLabels(r.Spec.UnverifiedUserAnnotations)}
		},
		Fields: func(r *certificatesv1.PodCertificateRequest) fields.Set {
			return fields.Set{"spec.signerName": r.Spec.SignerName, "spec.podName": r.Spec.PodName, "spec.nodeName": string(r.Spec.NodeName)}
		},
	}.Apply(registry.Resource{
		GVK:        certificatesv1.SchemeGroupVersion.WithKind("PodCertificateRequest"),
		Plural:     "podcertificaterequests",
		Singular:   "podcertificaterequest",
		Namespaced: true,
		New:        func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		NewList:    func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "PodName", Type: "string", Description: specDesc["podName"]},
			{Name: "ServiceAccountName", Type: "string", Description: specDesc["serviceAccountName"]},
			{Name: "NodeName", Type: "string", Description: specDesc["nodeName"]},
			{Name: "SignerName", Type: "string", Description: specDesc["signerName"]},
			{Name: "State", Type: "string", Description: "Is the request Pending, Issued, Denied, or Failed?"},
			{Name: "UnverifiedUserAnnotations", Type: "string", Priority: 1, Description: specDesc["unverifiedUserAnnotations"]},
		},
	})
}

// PodCertificateRequestState is the request's state as kube-apiserver's table shows
// it: Issued, Denied or Failed after its condition of that type, else Pending.
func PodCertificateRequestState(r *certificatesv1.PodCertificateRequest) string {
	state := "Pending"
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			state = c.Type
		}
	}
	return state
}

// formatLabels prints a map as k=v pairs sorted by key, "<none>" when empty.
func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// internalPCR converts a request for Kubernetes' validation.
func internalPCR(r *certificatesv1.PodCertificateRequest) *api.PodCertificateRequest {
	out := &api.PodCertificateRequest{}
	if err := apiv1.Convert_v1_PodCertificateRequest_To_certificates_PodCertificateRequest(r, out, nil); err != nil {
		panic(fmt.Sprintf("converting PodCertificateRequest %s/%s: %v", r.Namespace, r.Name, err))
	}
	return out
}
