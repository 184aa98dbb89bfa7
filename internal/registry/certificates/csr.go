// Package certificates serves certificates.k8s.io/v1 CertificateSigningRequests with
// their approval and status subresources.
package certificates

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// legacyUnknownSignerName is the signer of CSRs made through v1beta1 before signer
// names existed; v1 refuses it for new requests.
const legacyUnknownSignerName = "kubernetes.io/legacy-unknown"

var (
	allValidUsages = sets.New[string](
		string(certificatesv1.UsageSigning), string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageContentCommitment),
		string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageKeyAgreement), string(certificatesv1.UsageDataEncipherment),
		string(certificatesv1.UsageCertSign), string(certificatesv1.UsageCRLSign), string(certificatesv1.UsageEncipherOnly),
		string(certificatesv1.UsageDecipherOnly), string(certificatesv1.UsageAny), string(certificatesv1.UsageServerAuth),
		string(certificatesv1.UsageClientAuth), string(certificatesv1.UsageCodeSigning), string(certificatesv1.UsageEmailProtection),
		string(certificatesv1.UsageSMIME), string(certificatesv1.UsageIPsecEndSystem), string(certificatesv1.UsageIPsecTunnel),
		string(certificatesv1.UsageIPsecUser), string(certificatesv1.UsageTimestamping), string(certificatesv1.UsageOCSPSigning),
		string(certificatesv1.UsageMicrosoftSGC), string(certificatesv1.UsageNetscapeSGC),
	)
	trueOnlyConditionTypes = sets.New(string(certificatesv1.CertificateApproved), string(certificatesv1.CertificateDenied), string(certificatesv1.CertificateFailed))
	allStatusValues        = []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
)

// CertificateSigningRequestResource serves certificatesigningrequests (short name csr):
// cluster-scoped, any name, the requesting user's identity in spec (written by the API
// server's admission, never by the client), spec immutable; the approval subresource
// writes only status.conditions, the status subresource the rest of status and
// conditions other than Approved and Denied; validated as Kubernetes does (a signed PEM
// request, known usages, a domain-qualified signerName, Approved and Denied exclusive
// and never removed, a PEM certificate set once); field selector spec.signerName; the
// NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION table.
func CertificateSigningRequestResource() registry.Resource {
	specDesc := certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return registry.Strategy[*certificatesv1.CertificateSigningRequest]{
		PrepareForCreate: func(csr *certificatesv1.CertificateSigningRequest) {
			csr.Status = certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{}}
		},
		PrepareForUpdate: func(csr, old *certificatesv1.CertificateSigningRequest) {
			csr.Spec = old.Spec
			csr.Status = old.Status
		},
		Validate: func(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
			return validateCSR(csr, optionsFor(csr, nil))
		},
		ValidateUpdate: func(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
			return validateCSRUpdate(csr, old, optionsFor(csr, old))
		},
		Row: func(csr *certificatesv1.CertificateSigningRequest, now time.Time) []interface{} {
			signer := "<none>"
			if csr.Spec.SignerName != "" {
				signer = csr.Spec.SignerName
			}
			duration := "<none>"
			if s := csr.Spec.ExpirationSeconds; s != nil {
				duration = registry.HumanDuration(time.Duration(*s) * time.Second)
			}
			return []interface{}{csr.Name, registry.HumanAge(csr.CreationTimestamp, now), signer, csr.Spec.Username, duration, Condition(csr)}
		},
		Fields: func(csr *certificatesv1.CertificateSigningRequest) fields.Set {
			return fields.Set{"spec.signerName": csr.Spec.SignerName}
		},
	}.Apply(registry.Resource{
		GVK:            certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"),
		Plural:         "certificatesigningrequests",
		Singular:       "certificatesigningrequest",
		ShortNames:     []string{"csr"},
		New:            func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList:        func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		NameValidation: func(string, bool) []string { return nil },
		// Both subresources write a part of status, and a status write keeps the
		// request's metadata, so they are written as parts rather than as the generic
		// status subresource (which would keep the stored metadata).
		Subresources: map[string]*registry.SubresourceStrategy{
			"approval": {
				PrepareForUpdate: registry.HookUpdate(func(csr, old *certificatesv1.CertificateSigningRequest) {
					populateConditionTimestamps(csr, old, time.Now())
					conditions := csr.Status.Conditions
					csr.Spec = old.Spec
					csr.Status = old.Status
					csr.Status.Conditions = conditions
				}),
				ValidateUpdate: registry.FuncUpdate(func(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
					opts := optionsFor(csr, old)
					opts.allowSettingApprovalConditions = true
					return validateCSRUpdate(csr, old, opts)
				}),
			},
			"status": {
				PrepareForUpdate: registry.HookUpdate(func(csr, old *certificatesv1.CertificateSigningRequest) {
					csr.Spec = old.Spec
					preserveConditions(csr, old, certificatesv1.CertificateApproved)
					preserveConditions(csr, old, certificatesv1.CertificateDenied)
					populateConditionTimestamps(csr, old, time.Now())
				}),
				ValidateUpdate: registry.FuncUpdate(func(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
					opts := optionsFor(csr, old)
					opts.allowSettingCertificate = true
					return validateCSRUpdate(csr, old, opts)
				}),
			},
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			registry.AgeColumn,
			{Name: "SignerName", Type: "string", Description: specDesc["signerName"]},
			{Name: "Requestor", Type: "string", Description: specDesc["request"]},
			{Name: "RequestedDuration", Type: "string", Description: specDesc["expirationSeconds"]},
			{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
		},
	})
}

// Condition summarises a CSR as kubectl's CONDITION column does: Denied, Approved or
// Pending, then ",Failed" and ",Issued" when they apply.
func Condition(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	if denied {
		status = "Denied"
	} else if approved {
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}

// preserveConditions keeps the stored conditions of type t when a status write has as
// many of them: only the approval subresource changes Approved and Denied.
func preserveConditions(csr, old *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) {
	oldIdx, newIdx := conditionIndices(old, t), conditionIndices(csr, t)
	if len(oldIdx) != len(newIdx) {
		return
	}
	for i, o := range oldIdx {
		csr.Status.Conditions[newIdx[i]] = old.Status.Conditions[o]
	}
}

func conditionIndices(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []int {
	var out []int
	for i, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, i)
		}
	}
	return out
}

// populateConditionTimestamps fills lastUpdateTime, and lastTransitionTime from the
// stored condition of the same type and status (else now).
func populateConditionTimestamps(csr, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = metav1.NewTime(now)
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now)
			for _, o := range old.Status.Conditions {
				if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
					c.LastTransitionTime = o.LastTransitionTime
					break
				}
			}
		}
	}
}

// options relax validation for what an update inherits from stored data, as upstream's
// certificateValidationOptions do.
type options struct {
	allowSettingApprovalConditions, allowSettingCertificate             bool
	allowBothApprovedAndDenied, allowLegacySignerName                   bool
	allowDuplicateConditionTypes, allowEmptyConditionType               bool
	allowArbitraryCertificate, allowUnknownUsages, allowDuplicateUsages bool
}

func optionsFor(csr, old *certificatesv1.CertificateSigningRequest) options {
	if old == nil {
		return options{}
	}
	var approved, denied, emptyType, dupType bool
	seen := map[certificatesv1.RequestConditionType]bool{}
	for _, c := range old.Status.Conditions {
		approved = approved || c.Type == certificatesv1.CertificateApproved
		denied = denied || c.Type == certificatesv1.CertificateDenied
		emptyType = emptyType || c.Type == ""
		dupType = dupType || seen[c.Type]
		seen[c.Type] = true
	}
	var unknownUsage, dupUsage bool
	seenUsage := map[certificatesv1.KeyUsage]bool{}
	for _, u := range old.Spec.Usages {
		unknownUsage = unknownUsage || !allValidUsages.Has(string(u))
		dupUsage = dupUsage || seenUsage[u]
		seenUsage[u] = true
	}
	return options{
		allowBothApprovedAndDenied:   approved && denied,
		allowLegacySignerName:        old.Spec.SignerName == legacyUnknownSignerName,
		allowDuplicateConditionTypes: dupType,
		allowEmptyConditionType:      emptyType,
		allowArbitraryCertificate:    bytes.Equal(csr.Status.Certificate, old.Status.Certificate) || certificateError(old.Status.Certificate) != nil,
		allowUnknownUsages:           unknownUsage,
		allowDuplicateUsages:         dupUsage,
	}
}

func validateCSR(csr *certificatesv1.CertificateSigningRequest, opts options) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if err := requestError(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		if !opts.allowUnknownUsages && !allValidUsages.Has(string(u)) {
			errs = append(errs, field.NotSupported(spec.Child("usages").Index(i), u, sets.List(allValidUsages)))
		}
		if !opts.allowDuplicateUsages && seen[u] {
			errs = append(errs, field.Duplicate(spec.Child("usages").Index(i), u))
		}
		seen[u] = true
	}
	if !opts.allowLegacySignerName && csr.Spec.SignerName == legacyUnknownSignerName {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, ValidateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateConditions(field.NewPath("status", "conditions"), csr, opts)...)
	if !opts.allowArbitraryCertificate {
		if err := certificateError(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return errs
}

func validateConditions(fldPath *field.Path, csr *certificatesv1.CertificateSigningRequest, opts options) field.ErrorList {
	var errs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	var approved, denied bool
	for i, c := range csr.Status.Conditions {
		p := fldPath.Index(i)
		if !opts.allowEmptyConditionType && c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
		allowed := allStatusValues
		if trueOnlyConditionTypes.Has(string(c.Type)) {
			allowed = []string{string(corev1.ConditionTrue)}
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(p.Child("status"), ""))
		case !slices.Contains(allowed, string(c.Status)):
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, allowed))
		}
		if !opts.allowBothApprovedAndDenied {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				approved = true
				if denied {
					errs = append(errs, field.Invalid(fldPath, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			case certificatesv1.CertificateDenied:
				denied = true
				if approved {
					errs = append(errs, field.Invalid(fldPath, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			}
		}
		if !opts.allowDuplicateConditionTypes && seen[c.Type] {
			errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
		}
		seen[c.Type] = true
	}
	return errs
}

func validateCSRUpdate(csr, old *certificatesv1.CertificateSigningRequest, opts options) field.ErrorList {
	errs := validateCSR(csr, opts)
	conditions := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if len(conditionIndices(csr, t)) < len(conditionIndices(old, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !opts.allowSettingApprovalConditions {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			oldC, newC := conditionsOf(old, t), conditionsOf(csr, t)
			switch {
			case len(newC) < len(oldC):
			case len(newC) > len(oldC):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !apiequality.Semantic.DeepEqual(oldC, newC):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q", t)))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		if !opts.allowSettingCertificate {
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not set certificate content"))
		} else if len(old.Status.Certificate) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
		}
	}
	return errs
}

func conditionsOf(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, i := range conditionIndices(csr, t) {
		out = append(out, csr.Status.Conditions[i])
	}
	return out
}

// requestError parses a PEM certificate request and checks its signature.
func requestError(pemBytes []byte) error {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// certificateError checks an issued certificate: empty, or only CERTIFICATE PEM blocks
// without headers, each holding a parsable certificate.
func certificateError(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// ValidateSignerName checks a signerName as Kubernetes does: "domain/path" where the
// domain has at least two DNS labels and the path is dot-separated DNS subdomains, at
// most 571 characters in all.
func ValidateSignerName(fldPath *field.Path, signerName string) field.ErrorList {
	if signerName == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	segments := strings.Split(signerName, "/")
	if len(segments) != 2 {
		return field.ErrorList{field.Invalid(fldPath, signerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	maxDomain := validation.DNS1123SubdomainMaxLength
	if len(segments[0]) > maxDomain {
		errs = append(errs, field.TooLong(fldPath, "", maxDomain))
	}
	domainLabels := strings.Split(segments[0], ".")
	for _, l := range domainLabels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(fldPath, segments[0], fmt.Sprintf("validating label %q: %s", l, msg)))
			}
			break
		}
	}
	if len(domainLabels) < 2 {
		errs = append(errs, field.Invalid(fldPath, segments[0], "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(segments[1], ".") {
		if msgs := validation.IsDNS1123Subdomain(l); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(fldPath, segments[1], fmt.Sprintf("validating label %q: %s", l, msg)))
			}
			break
		}
	}
	if maxLen := maxDomain + validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 2; len(signerName) > maxLen {
		errs = append(errs, field.TooLong(fldPath, "", maxLen))
	}
	return errs
}
