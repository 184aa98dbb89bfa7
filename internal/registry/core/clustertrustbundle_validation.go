package core

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
)

// podValidateClusterTrustBundle checks a projected volume's clusterTrustBundle source
// as kube-apiserver's pod validation does: exactly one of name (a valid bundle name,
// without labelSelector) and signerName (domain-qualified, with a valid
// labelSelector); a relative path without "..", distinct from the volume's other paths
// (seen, which it extends); a valid user id.
func podValidateClusterTrustBundle(p *v1.ClusterTrustBundleProjection, projPath, volPath *field.Path, seen map[string]bool) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case p.Name != nil && p.SignerName != nil:
		allErrs = append(allErrs, field.Invalid(projPath, p, "only one of name and signerName may be used"))
	case p.Name != nil:
		name := *p.Name
		if name == "" {
			allErrs = append(allErrs, field.Required(projPath.Child("name"), "must be a valid object name"))
		}
		signer := ""
		if i := strings.LastIndex(name, ":"); i != -1 {
			signer = strings.ReplaceAll(name[:i], ":", "/")
		}
		for _, msg := range corevalidation.ValidateClusterTrustBundleName(signer)(name, false) {
			allErrs = append(allErrs, field.Invalid(projPath.Child("name"), name, fmt.Sprintf("not a valid clustertrustbundlename: %v", msg)))
		}
		if p.LabelSelector != nil {
			allErrs = append(allErrs, field.Invalid(projPath.Child("labelSelector"), p.LabelSelector, "labelSelector must be unset if name is specified"))
		}
	case p.SignerName != nil:
		if *p.SignerName == "" {
			allErrs = append(allErrs, field.Required(projPath.Child("signerName"), "must be a valid signer name"))
		}
		allErrs = append(allErrs, corevalidation.ValidateSignerName(projPath.Child("signerName"), *p.SignerName)...)
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(p.LabelSelector,
			metav1validation.LabelSelectorValidationOptions{}, projPath.Child("labelSelector"))...)
	default:
		allErrs = append(allErrs, field.Required(projPath, "either name or signerName must be specified"))
	}
	if p.Path == "" {
		allErrs = append(allErrs, field.Required(projPath.Child("path"), ""))
	}
	allErrs = append(allErrs, podValidateUserID(p.User, projPath.Child("user"))...)
	allErrs = append(allErrs, corevalidation.ValidateLocalNonReservedPath(p.Path, projPath.Child("path"))...)
	if seen[p.Path] {
		allErrs = append(allErrs, field.Invalid(volPath, p.Path, "conflicting duplicate paths"))
	}
	seen[p.Path] = true
	return allErrs
}

// podValidateUserID checks an optional user id of a projection.
func podValidateUserID(user *int64, fldPath *field.Path) field.ErrorList {
	if user == nil {
		return nil
	}
	var allErrs field.ErrorList
	for _, msg := range validation.IsValidUserID(*user) {
		allErrs = append(allErrs, field.Invalid(fldPath, *user, msg))
	}
	return allErrs
}
