// Package networking serves networking.k8s.io/v1 Ingresses and IngressClasses.
package networking

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// annotationIngressClass is the pre-v1 way of choosing a class; still honoured, but it must
// agree with spec.ingressClassName and earns a deprecation warning.
const annotationIngressClass = "kubernetes.io/ingress.class"

var (
	supportedPathTypes = []networkingv1.PathType{
		networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix,
	}
	// Path fragments that would let Exact and Prefix paths escape their meaning after
	// normalisation by a proxy.
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// loadBalancerWidth is where the ADDRESS cell of a plain (not -o wide) listing is clipped.
const loadBalancerWidth = 16

// IngressResource returns networking.k8s.io/v1 Ingress: namespaced, short name "ing", with
// a status subresource, generation tracking, Kubernetes' validation and the
// NAME CLASS HOSTS ADDRESS PORTS AGE table.
func IngressResource() registry.Resource {
	return registry.Resource{
		GVK:              networkingv1.SchemeGroupVersion.WithKind("Ingress"),
		Plural:           "ingresses",
		Singular:         "ingress",
		ShortNames:       []string{"ing"},
		Namespaced:       true,
		New:              func() runtime.Object { return &networkingv1.Ingress{} },
		NewList:          func() runtime.Object { return &networkingv1.IngressList{} },
		TrackGeneration:  true,
		PrepareForCreate: prepareIngressForCreate,
		Validate:         registry.Func(ValidateIngress),
		ValidateUpdate:   registry.FuncUpdate(ValidateIngressUpdate),
		Warnings:         ingressWarnings,
		Status: &registry.StatusStrategy{
			ValidateUpdate: registry.FuncUpdate(ValidateIngressStatusUpdate),
		},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Class", Type: "string", Description: "The name of the IngressClass resource that should be used for additional configuration"},
			{Name: "Hosts", Type: "string", Description: "Hosts that incoming requests are matched against before the ingress rule"},
			{Name: "Address", Type: "string", Description: "Address is a list containing ingress points for the load-balancer"},
			{Name: "Ports", Type: "string", Description: "Ports of TLS configurations that open"},
			registry.AgeColumn,
		},
		Row: ingressRow,
	}
}

func asIngress(obj runtime.Object) *networkingv1.Ingress {
	i, _ := obj.(*networkingv1.Ingress)
	return i
}

// prepareIngressForCreate clears status: only the ingress controller reports addresses.
func prepareIngressForCreate(obj runtime.Object) {
	if ing := asIngress(obj); ing != nil {
		ing.Status = networkingv1.IngressStatus{}
	}
}

func ingressWarnings(obj, old runtime.Object) []string {
	ing := asIngress(obj)
	if ing == nil || old != nil {
		return nil
	}
	if _, ok := ing.Annotations[annotationIngressClass]; ok {
		return []string{fmt.Sprintf("annotation %q is deprecated, please use 'spec.ingressClassName' instead", annotationIngressClass)}
	}
	return nil
}

// ingressOptions relax rules that Kubernetes tightened after objects were stored, so an
// update of such an object is not refused for what it already contained.
type ingressOptions struct {
	allowInvalidSecretName       bool
	allowInvalidWildcardHostRule bool
}

// ValidateIngress checks a new Ingress: its spec, and that the legacy class annotation,
// when set along with spec.ingressClassName, names the same class.
func ValidateIngress(ing *networkingv1.Ingress) field.ErrorList {
	if ing == nil {
		return nil
	}
	errs := validateIngressSpec(&ing.Spec, field.NewPath("spec"), ingressOptions{})
	if v, ok := ing.Annotations[annotationIngressClass]; ok && ing.Spec.IngressClassName != nil && v != *ing.Spec.IngressClassName {
		errs = append(errs, field.Invalid(field.NewPath("annotations").Child(annotationIngressClass), v, "must match `ingressClassName` when both are specified"))
	}
	return errs
}

// ValidateIngressUpdate checks an updated Ingress, tolerating invalid TLS secret names and
// wildcard rules the old object already had.
func ValidateIngressUpdate(ing, old *networkingv1.Ingress) field.ErrorList {
	if ing == nil {
		return nil
	}
	opts := ingressOptions{}
	if old != nil {
		for _, tls := range old.Spec.TLS {
			if len(validateTLSSecretName(tls.SecretName)) > 0 {
				opts.allowInvalidSecretName = true
			}
		}
		for i := range old.Spec.Rules {
			r := &old.Spec.Rules[i]
			if strings.Contains(r.Host, "*") && len(validateRuleValue(&r.IngressRuleValue, field.NewPath("spec"))) > 0 {
				opts.allowInvalidWildcardHostRule = true
			}
		}
	}
	return validateIngressSpec(&ing.Spec, field.NewPath("spec"), opts)
}

// ValidateIngressStatusUpdate checks the load balancer addresses a status write reports;
// IPs the old status already had are accepted as they are.
func ValidateIngressStatusUpdate(ing, old *networkingv1.Ingress) field.ErrorList {
	if ing == nil {
		return nil
	}
	var oldIPs []string
	if old != nil {
		for _, lb := range old.Status.LoadBalancer.Ingress {
			if lb.IP != "" {
				oldIPs = append(oldIPs, lb.IP)
			}
		}
	}
	var errs field.ErrorList
	base := field.NewPath("status", "loadBalancer", "ingress")
	for i, lb := range ing.Status.LoadBalancer.Ingress {
		p := base.Index(i)
		if lb.IP != "" {
			errs = append(errs, validation.IsValidIPForLegacyField(p.Child("ip"), lb.IP, true, oldIPs)...)
		}
		if lb.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(lb.Hostname) {
				errs = append(errs, field.Invalid(p.Child("hostname"), lb.Hostname, msg))
			}
			if net.ParseIP(lb.Hostname) != nil {
				errs = append(errs, field.Invalid(p.Child("hostname"), lb.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}

func validateIngressSpec(spec *networkingv1.IngressSpec, p *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(p, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateBackend(spec.DefaultBackend, p.Child("defaultBackend"))...)
	}
	for i := range spec.Rules {
		errs = append(errs, validateRule(&spec.Rules[i], p.Child("rules").Index(i), opts)...)
	}
	for i, tls := range spec.TLS {
		tp := p.Child("tls").Index(i)
		for j, host := range tls.Hosts {
			errs = append(errs, validateHost(host, tp.Child("hosts").Index(j))...)
		}
		if !opts.allowInvalidSecretName {
			for _, msg := range validateTLSSecretName(tls.SecretName) {
				errs = append(errs, field.Invalid(tp.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*spec.IngressClassName, false) {
			errs = append(errs, field.Invalid(p.Child("ingressClassName"), *spec.IngressClassName, msg))
		}
	}
	return errs
}

// validateHost accepts a DNS subdomain, optionally with a leading "*." wildcard label.
func validateHost(host string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	msgs := validation.IsDNS1123Subdomain(host)
	if strings.Contains(host, "*") {
		msgs = validation.IsWildcardDNS1123Subdomain(host)
	}
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, host, msg))
	}
	return errs
}

func validateTLSSecretName(name string) []string {
	if name == "" {
		return nil
	}
	return apivalidation.NameIsDNSSubdomain(name, false)
}

func validateRule(rule *networkingv1.IngressRule, p *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	wildcard := false
	if rule.Host != "" {
		hp := p.Child("host")
		if net.ParseIP(rule.Host) != nil {
			errs = append(errs, field.Invalid(hp, rule.Host, "must be a DNS name, not an IP address"))
		}
		wildcard = strings.Contains(rule.Host, "*")
		errs = append(errs, validateHost(rule.Host, hp)...)
	}
	if !wildcard || !opts.allowInvalidWildcardHostRule {
		errs = append(errs, validateRuleValue(&rule.IngressRuleValue, p)...)
	}
	return errs
}

func validateRuleValue(v *networkingv1.IngressRuleValue, p *field.Path) field.ErrorList {
	if v.HTTP == nil {
		return nil
	}
	var errs field.ErrorList
	pathsPath := p.Child("http", "paths")
	if len(v.HTTP.Paths) == 0 {
		errs = append(errs, field.Required(pathsPath, ""))
	}
	for i := range v.HTTP.Paths {
		errs = append(errs, validateHTTPPath(&v.HTTP.Paths[i], pathsPath.Index(i))...)
	}
	return errs
}

func validateHTTPPath(hp *networkingv1.HTTPIngressPath, p *field.Path) field.ErrorList {
	if hp.PathType == nil {
		return field.ErrorList{field.Required(p.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pp := p.Child("path")
	switch *hp.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(hp.Path, "/") {
			errs = append(errs, field.Invalid(pp, hp.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(hp.Path, seq) {
				errs = append(errs, field.Invalid(pp, hp.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suffix := range invalidPathSuffixes {
			if strings.HasSuffix(hp.Path, suffix) {
				errs = append(errs, field.Invalid(pp, hp.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if hp.Path != "" && !strings.HasPrefix(hp.Path, "/") {
			errs = append(errs, field.Invalid(pp, hp.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("pathType"), *hp.PathType, supportedPathTypes))
	}
	return append(errs, validateBackend(&hp.Backend, p.Child("backend"))...)
}

// validateBackend requires exactly one of a Service (by DNS-1035 name and exactly one of
// port name or number) or a typed resource reference.
func validateBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(p, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return validateResourceRef(b.Resource.APIGroup, b.Resource.Kind, b.Resource.Name, p.Child("resource"))
	case b.Service == nil:
		return field.ErrorList{field.Invalid(p, "", "resource or service backend is required")}
	}
	var errs field.ErrorList
	svc := b.Service
	if svc.Name == "" {
		errs = append(errs, field.Required(p.Child("service", "name"), ""))
	} else {
		for _, msg := range apivalidation.NameIsDNS1035Label(svc.Name, false) {
			errs = append(errs, field.Invalid(p.Child("service", "name"), svc.Name, msg))
		}
	}
	hasName, hasNumber := svc.Port.Name != "", svc.Port.Number != 0
	switch {
	case hasName && hasNumber:
		errs = append(errs, field.Invalid(p, "", "cannot set both port name & port number"))
	case hasName:
		for _, msg := range validation.IsValidPortName(svc.Port.Name) {
			errs = append(errs, field.Invalid(p.Child("service", "port", "name"), svc.Port.Name, msg))
		}
	case hasNumber:
		for _, msg := range validation.IsValidPortNum(int(svc.Port.Number)) {
			errs = append(errs, field.Invalid(p.Child("service", "port", "number"), svc.Port.Number, msg))
		}
	default:
		errs = append(errs, field.Required(p, "port name or number is required"))
	}
	return errs
}

// validateResourceRef checks the group, kind and name of a reference to another object.
func validateResourceRef(apiGroup *string, kind, name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if apiGroup != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*apiGroup) {
			errs = append(errs, field.Invalid(p.Child("apiGroup"), *apiGroup, msg))
		}
	}
	if kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else {
		for _, msg := range content.IsPathSegmentName(kind) {
			errs = append(errs, field.Invalid(p.Child("kind"), kind, msg))
		}
	}
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range content.IsPathSegmentName(name) {
			errs = append(errs, field.Invalid(p.Child("name"), name, msg))
		}
	}
	return errs
}

// ingressRow prints an Ingress as kubectl does: "<none>" without a class, "*" without
// hosts, at most three hosts, the sorted load balancer addresses clipped to 16 characters,
// and "80" or "80, 443" depending on TLS.
func ingressRow(obj runtime.Object, now time.Time) []interface{} {
	ing := asIngress(obj)
	if ing == nil {
		return nil
	}
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	ports := "80"
	if len(ing.Spec.TLS) != 0 {
		ports = "80, 443"
	}
	return []interface{}{
		ing.Name, class, formatHosts(ing.Spec.Rules), formatAddress(ing.Status.LoadBalancer),
		ports, registry.HumanAge(ing.CreationTimestamp, now),
	}
}

func formatHosts(rules []networkingv1.IngressRule) string {
	const shown = 3
	var list []string
	more := false
	for _, r := range rules {
		if len(list) == shown {
			more = true
		}
		if !more && r.Host != "" {
			list = append(list, r.Host)
		}
	}
	if len(list) == 0 {
		return "*"
	}
	s := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", s, len(rules)-shown)
	}
	return s
}

func formatAddress(lb networkingv1.IngressLoadBalancerStatus) string {
	var addrs []string
	for _, in := range lb.Ingress {
		a := in.IP
		if a == "" {
			a = in.Hostname
		}
		if a != "" && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	slices.Sort(addrs)
	s := strings.Join(addrs, ",")
	if len(s) > loadBalancerWidth {
		s = s[:loadBalancerWidth-3] + "..."
	}
	return s
}
