package networking

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/tranche/tranche/internal/registry"
)

var (
	supportedPolicyProtocols = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	supportedPolicyTypes     = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

// NetworkPolicyResource returns networking.k8s.io/v1 NetworkPolicy: namespaced, short name
// "netpol", no categories and no status (the v1 type's status is tombstoned), generation
// tracking, Kubernetes' defaults and validation, and the NAME POD-SELECTOR AGE table.
func NetworkPolicyResource() registry.Resource {
	return registry.Resource{
		GVK:             networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
		Plural:          "networkpolicies",
		Singular:        "networkpolicy",
		ShortNames:      []string{"netpol"},
		Namespaced:      true,
		New:             func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		NewList:         func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		TrackGeneration: true,
		Default:         registry.Hook(DefaultNetworkPolicy),
		Validate:        registry.Func(ValidateNetworkPolicy),
		ValidateUpdate:  registry.FuncUpdate(ValidateNetworkPolicyUpdate),
		Warnings:        registry.FuncUpdate(networkPolicyWarnings),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Pod-Selector", Type: "string", Description: networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
			registry.AgeColumn,
		},
		Row: registry.FuncWith(networkPolicyRow),
	}
}

// DefaultNetworkPolicy applies Kubernetes' v1 defaults: a port without a protocol is TCP,
// and a policy without policyTypes is an Ingress policy, and an Egress one too when it has
// egress rules.
func DefaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	defaultPorts := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				ports[i].Protocol = new(corev1.ProtocolTCP)
			}
		}
	}
	for i := range np.Spec.Ingress {
		defaultPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPorts(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

// networkPolicyOptions relax rules for what an update keeps from the stored object.
type networkPolicyOptions struct {
	// allowInvalidLabelValues accepts selector values the old podSelector already
	// had invalid.
	allowInvalidLabelValues bool
	// oldCIDRs are ipBlock CIDRs (and excepts) of the old object, accepted without
	// revalidation since a newer, stricter parser may refuse them.
	oldCIDRs []string
}

// ValidateNetworkPolicy checks a new NetworkPolicy's spec as Kubernetes does.
func ValidateNetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	if np == nil {
		return nil
	}
	return validateNetworkPolicySpec(&np.Spec, field.NewPath("spec"), networkPolicyOptions{})
}

// ValidateNetworkPolicyUpdate checks an updated NetworkPolicy, tolerating invalid selector
// label values when the old podSelector had them and any CIDR the old object held.
func ValidateNetworkPolicyUpdate(np, old *networkingv1.NetworkPolicy) field.ErrorList {
	if np == nil {
		return nil
	}
	var opts networkPolicyOptions
	if old != nil {
		opts.allowInvalidLabelValues = len(metav1validation.ValidateLabelSelector(&old.Spec.PodSelector, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0
		for _, r := range old.Spec.Ingress {
			opts.oldCIDRs = appendCIDRs(opts.oldCIDRs, r.From)
		}
		for _, r := range old.Spec.Egress {
			opts.oldCIDRs = appendCIDRs(opts.oldCIDRs, r.To)
		}
	}
	return validateNetworkPolicySpec(&np.Spec, field.NewPath("spec"), opts)
}

func appendCIDRs(cidrs []string, peers []networkingv1.NetworkPolicyPeer) []string {
	for _, p := range peers {
		if p.IPBlock != nil {
			cidrs = append(cidrs, p.IPBlock.CIDR)
			cidrs = append(cidrs, p.IPBlock.Except...)
		}
	}
	return cidrs
}

func validateNetworkPolicySpec(spec *networkingv1.NetworkPolicySpec, p *field.Path, opts networkPolicyOptions) field.ErrorList {
	selOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValues}
	errs := metav1validation.ValidateLabelSelector(&spec.PodSelector, selOpts, p.Child("podSelector"))
	for i := range spec.Ingress {
		rp := p.Child("ingress").Index(i)
		for j := range spec.Ingress[i].Ports {
			errs = append(errs, validateNetworkPolicyPort(&spec.Ingress[i].Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range spec.Ingress[i].From {
			errs = append(errs, validateNetworkPolicyPeer(&spec.Ingress[i].From[j], rp.Child("from").Index(j), opts)...)
		}
	}
	for i := range spec.Egress {
		rp := p.Child("egress").Index(i)
		for j := range spec.Egress[i].Ports {
			errs = append(errs, validateNetworkPolicyPort(&spec.Egress[i].Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range spec.Egress[i].To {
			errs = append(errs, validateNetworkPolicyPeer(&spec.Egress[i].To[j], rp.Child("to").Index(j), opts)...)
		}
	}
	if len(spec.PolicyTypes) > len(supportedPolicyTypes) {
		return append(errs, field.Invalid(p.Child("policyTypes"), &spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(p.Child("policyTypes").Index(i), t, supportedPolicyTypes))
		}
	}
	return errs
}

// validateNetworkPolicyPort checks the protocol, and a numeric port with an optional
// endPort range or a named port without one.
func validateNetworkPolicyPort(port *networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP && *port.Protocol != corev1.ProtocolUDP && *port.Protocol != corev1.ProtocolSCTP {
		errs = append(errs, field.NotSupported(p.Child("protocol"), *port.Protocol, supportedPolicyProtocols))
	}
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(port.Port.IntVal)) {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port.IntVal, msg))
		}
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, msg))
			}
		}
	default:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port.StrVal, msg))
		}
	}
	return errs
}

// validateNetworkPolicyPeer requires at least one of podSelector, namespaceSelector and
// ipBlock, and ipBlock alone when it is set.
func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path, opts networkPolicyOptions) field.ErrorList {
	var errs field.ErrorList
	selOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValues}
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, selOpts, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, selOpts, p.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		errs = append(errs, validateIPBlock(peer.IPBlock, p.Child("ipBlock"), opts.oldCIDRs)...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a peer"))
	case n > 1 && peer.IPBlock != nil:
		errs = append(errs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	}
	return errs
}

// validateIPBlock requires a valid CIDR and excepts that are strict subsets of it.
func validateIPBlock(b *networkingv1.IPBlock, p *field.Path, oldCIDRs []string) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(p.Child("cidr"), "")}
	}
	errs := validation.IsValidCIDRForLegacyField(p.Child("cidr"), b.CIDR, true, oldCIDRs)
	_, cidr, err := netutils.ParseCIDRSloppy(b.CIDR)
	if err != nil {
		return errs
	}
	cidrLen, _ := cidr.Mask.Size()
	for i, s := range b.Except {
		ep := p.Child("except").Index(i)
		errs = append(errs, validation.IsValidCIDRForLegacyField(ep, s, true, oldCIDRs)...)
		_, except, err := netutils.ParseCIDRSloppy(s)
		if err != nil {
			continue
		}
		exceptLen, _ := except.Mask.Size()
		if !cidr.Contains(except.IP) || cidrLen >= exceptLen {
			errs = append(errs, field.Invalid(ep, s, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

// networkPolicyWarnings flags ipBlock CIDRs written in a non-canonical form (leading
// zeros, host bits set, IPv4-mapped IPv6), on create and update alike.
func networkPolicyWarnings(np, _ *networkingv1.NetworkPolicy) []string {
	var warnings []string
	peers := func(list []networkingv1.NetworkPolicyPeer, p *field.Path) {
		for j, peer := range list {
			if peer.IPBlock == nil {
				continue
			}
			bp := p.Index(j).Child("ipBlock")
			warnings = append(warnings, validation.GetWarningsForCIDR(bp.Child("cidr"), peer.IPBlock.CIDR)...)
			for k, e := range peer.IPBlock.Except {
				warnings = append(warnings, validation.GetWarningsForCIDR(bp.Child("except").Index(k), e)...)
			}
		}
	}
	for i := range np.Spec.Ingress {
		peers(np.Spec.Ingress[i].From, field.NewPath("spec", "ingress").Index(i).Child("from"))
	}
	for i := range np.Spec.Egress {
		peers(np.Spec.Egress[i].To, field.NewPath("spec", "egress").Index(i).Child("to"))
	}
	return warnings
}

// networkPolicyRow prints the pod selector as kubectl does ("<none>" when empty).
func networkPolicyRow(np *networkingv1.NetworkPolicy, now time.Time) []interface{} {
	return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), registry.HumanAge(np.CreationTimestamp, now)}
}
