package core

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/certificates"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
)

// podCertificateKeyTypes are the key types a podCertificate projection may ask for.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// podValidatePodCertificate checks a projected volume's podCertificate source as
// kube-apiserver's pod validation does: a domain-qualified signerName, valid
// userAnnotations, a known keyType, maxExpirationSeconds between an hour and 91 days
// (a day for kubernetes.io signers), at least one of credentialBundlePath, keyPath and
// certificateChainPath, each a relative path without "..", distinct from the other
// paths of the volume (seen, which it extends).
func podValidatePodCertificate(p *v1.PodCertificateProjection, projPath, volPath *field.Path, seen map[string]bool) field.ErrorList {
	allErrs := corevalidation.ValidateSignerName(projPath.Child("signerName"), p.SignerName)
	if p.UserAnnotations != nil {
		allErrs = append(allErrs, corevalidation.ValidateUserAnnotations(p.UserAnnotations, projPath.Child("userAnnotations"))...)
	}
	allErrs = append(allErrs, podValidateUserID(p.User, projPath.Child("user"))...)
	switch p.KeyType {
	case "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519":
	default:
		allErrs = append(allErrs, field.NotSupported(projPath.Child("keyType"), p.KeyType, podCertificateKeyTypes))
	}
	if s := p.MaxExpirationSeconds; s != nil {
		if *s < 3600 {
			allErrs = append(allErrs, field.Invalid(projPath.Child("maxExpirationSeconds"), *s, "if provided, maxExpirationSeconds must be >= 3600"))
		}
		limit := certificates.MaxMaxExpirationSeconds
		if corevalidation.IsKubernetesSignerName(p.SignerName) {
			limit = certificates.KubernetesMaxMaxExpirationSeconds
		}
		if *s > int32(limit) {
			allErrs = append(allErrs, field.Invalid(projPath.Child("maxExpirationSeconds"), *s, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", limit)))
		}
	}
	paths := 0
	for _, fp := range []struct{ name, path string }{
		{"credentialBundlePath", p.CredentialBundlePath}, {"keyPath", p.KeyPath}, {"certificateChainPath", p.CertificateChainPath},
	} {
		if fp.path == "" {
			continue
		}
		paths++
		allErrs = append(allErrs, corevalidation.ValidateLocalNonReservedPath(fp.path, projPath.Child(fp.name))...)
		if seen[fp.path] {
			allErrs = append(allErrs, field.Invalid(volPath, fp.path, "conflicting duplicate paths"))
		}
		seen[fp.path] = true
	}
	if paths == 0 {
		allErrs = append(allErrs, field.Required(projPath, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return allErrs
}
