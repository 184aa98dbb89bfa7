package core

import (
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Sorted value lists, as Kubernetes prints them in "Unsupported value" errors.
var (
	svcProtocols              = []string{"SCTP", "TCP", "UDP"}
	svcTypes                  = []string{"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}
	svcAffinities             = []string{"ClientIP", "None"}
	svcTrafficPolicies        = []string{"Cluster", "Local"}
	svcIPFamilies             = []string{"IPv4", "IPv6"}
	svcIPFamilyPolicies       = []string{"PreferDualStack", "RequireDualStack", "SingleStack"}
	svcIPModes                = []string{"Proxy", "VIP"}
	svcTrafficDistributions   = []string{"PreferClose", "PreferSameNode", "PreferSameZone"}
	svcMaxAffinityTimeoutSecs = int32(86400) // Kubernetes' MaxClientIPServiceAffinitySeconds
)

func svcIn(v string, list []string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// ValidateService checks a Service's spec the way Kubernetes' ValidateService does
// (metadata is the handlers' job), as a sequence of named steps whose errors come in
// Kubernetes' order. A nil service has nothing to check.
func ValidateService(svc *v1.Service) field.ErrorList {
	if svc == nil {
		return nil
	}
	var errs field.ErrorList
	for _, step := range []func(*v1.Service) field.ErrorList{
		svcValidateTopologyAnnotations,
		svcValidateTypeShape,
		svcValidatePorts,
		svcValidateSelector,
		svcValidateSessionAffinity,
		svcValidateClusterIPs,
		svcValidateExternalIPs,
		svcValidateType,
		svcValidatePortsUnique,
		svcValidateSourceRanges,
		svcValidateAllocateNodePorts,
		svcValidateLoadBalancerClass,
		svcValidateTrafficPolicies,
		svcValidateTrafficDistribution,
	} {
		errs = append(errs, step(svc)...)
	}
	return errs
}

var svcSpecPath = field.NewPath("spec")

// svcValidateTopologyAnnotations: the deprecated topology-aware-hints annotation and
// its successor must agree when both are set.
func svcValidateTopologyAnnotations(svc *v1.Service) field.ErrorList {
	hints, hintsSet := svc.Annotations[v1.DeprecatedAnnotationTopologyAwareHints]
	mode, modeSet := svc.Annotations[v1.AnnotationTopologyMode]
	if hintsSet && modeSet && hints != mode {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(v1.AnnotationTopologyMode), mode,
			fmt.Sprintf("must match annotations[%s] when both are specified", v1.DeprecatedAnnotationTopologyAwareHints))}
	}
	return nil
}

// svcValidateTypeShape checks what the type requires of the rest of the spec: ports
// unless headless or ExternalName, no headless LoadBalancer or NodePort, and an
// ExternalName service's name and missing addresses.
func svcValidateTypeShape(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	headless := svcIsHeadless(svc)
	if len(spec.Ports) == 0 && !headless && spec.Type != v1.ServiceTypeExternalName {
		errs = append(errs, field.Required(svcSpecPath.Child("ports"), ""))
	}
	switch spec.Type {
	case v1.ServiceTypeLoadBalancer:
		if headless {
			errs = append(errs, field.Invalid(svcSpecPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0], "may not be set to 'None' for LoadBalancer services"))
		}
	case v1.ServiceTypeNodePort:
		if headless {
			errs = append(errs, field.Invalid(svcSpecPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0], "may not be set to 'None' for NodePort services"))
		}
	case v1.ServiceTypeExternalName:
		// clusterIP is checked too (Kubernetes' conversion keeps the two in step, ours
		// may not have run), so "None" is refused like any other address.
		if len(spec.ClusterIPs) > 0 || spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(svcSpecPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(svcSpecPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(svcSpecPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// A trailing dot marks the CNAME as fully qualified.
		if cname := strings.TrimSuffix(spec.ExternalName, "."); cname != "" {
			for _, msg := range utilvalidation.IsDNS1123Subdomain(cname) {
				errs = append(errs, field.Invalid(svcSpecPath.Child("externalName"), cname, msg))
			}
		} else {
			errs = append(errs, field.Required(svcSpecPath.Child("externalName"), ""))
		}
	}
	return errs
}

// svcValidatePorts checks each port on its own (names, numbers, protocol, target).
func svcValidatePorts(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range svc.Spec.Ports {
		errs = append(errs, svcValidatePort(&svc.Spec.Ports[i], len(svc.Spec.Ports) > 1, names, svcSpecPath.Child("ports").Index(i))...)
	}
	return errs
}

// svcValidateSelector: the selector is a label set.
func svcValidateSelector(svc *v1.Service) field.ErrorList {
	if svc.Spec.Selector == nil {
		return nil
	}
	return metavalidation.ValidateLabels(svc.Spec.Selector, svcSpecPath.Child("selector"))
}

// svcValidateSessionAffinity checks the affinity and its config, which only ClientIP
// takes.
func svcValidateSessionAffinity(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	switch {
	case spec.SessionAffinity == "":
		errs = append(errs, field.Required(svcSpecPath.Child("sessionAffinity"), ""))
	case !svcIn(string(spec.SessionAffinity), svcAffinities):
		errs = append(errs, field.NotSupported(svcSpecPath.Child("sessionAffinity"), spec.SessionAffinity, svcAffinities))
	}
	if spec.SessionAffinity == v1.ServiceAffinityClientIP {
		errs = append(errs, svcValidateAffinityConfig(spec.SessionAffinityConfig, svcSpecPath.Child("sessionAffinityConfig"))...)
	} else if spec.SessionAffinity == v1.ServiceAffinityNone && spec.SessionAffinityConfig != nil {
		errs = append(errs, field.Forbidden(svcSpecPath.Child("sessionAffinityConfig"), "must not be set when session affinity is None"))
	}
	return errs
}

// svcValidateExternalIPs: each external IP is a valid address and not a special one.
func svcValidateExternalIPs(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range svc.Spec.ExternalIPs {
		p := svcSpecPath.Child("externalIPs").Index(i)
		if ipErrs := utilvalidation.IsValidIP(p, ip); len(ipErrs) != 0 {
			errs = append(errs, ipErrs...)
		} else {
			errs = append(errs, svcValidateNonSpecialIP(ip, p)...)
		}
	}
	return errs
}

// svcValidateType: the type is set and one of the four.
func svcValidateType(svc *v1.Service) field.ErrorList {
	switch {
	case svc.Spec.Type == "":
		return field.ErrorList{field.Required(svcSpecPath.Child("type"), "")}
	case !svcIn(string(svc.Spec.Type), svcTypes):
		return field.ErrorList{field.NotSupported(svcSpecPath.Child("type"), svc.Spec.Type, svcTypes)}
	}
	return nil
}

// svcValidatePortsUnique checks node ports (valid, not on ClusterIP services, unique
// per protocol) and that no protocol and port pair repeats.
func svcValidatePortsUnique(svc *v1.Service) field.ErrorList {
	type protoPort struct {
		proto v1.Protocol
		port  int32
	}
	var errs field.ErrorList
	nodePorts := map[protoPort]bool{}
	ports := map[protoPort]bool{}
	for i, p := range svc.Spec.Ports {
		portPath := svcSpecPath.Child("ports").Index(i)
		if p.NodePort != 0 {
			if svc.Spec.Type == v1.ServiceTypeClusterIP {
				errs = append(errs, field.Forbidden(portPath.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
			for _, msg := range utilvalidation.IsValidPortNum(int(p.NodePort)) {
				errs = append(errs, field.Invalid(portPath.Child("nodePort"), p.NodePort, msg))
			}
			key := protoPort{p.Protocol, p.NodePort}
			if nodePorts[key] {
				errs = append(errs, field.Duplicate(portPath.Child("nodePort"), p.NodePort))
			}
			nodePorts[key] = true
		}
		key := protoPort{p.Protocol, p.Port}
		if ports[key] {
			errs = append(errs, field.Duplicate(portPath, svcDuplicatePort{Protocol: p.Protocol, Port: p.Port}))
		}
		ports[key] = true
	}
	return errs
}

// svcValidateSourceRanges checks loadBalancerSourceRanges, or else the annotation of
// the same meaning: CIDRs, on LoadBalancer services only.
func svcValidateSourceRanges(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	if len(spec.LoadBalancerSourceRanges) > 0 {
		// Kubernetes names this path with a capital L; clients match on it.
		p := svcSpecPath.Child("LoadBalancerSourceRanges")
		if spec.Type != v1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, v := range spec.LoadBalancerSourceRanges {
			errs = append(errs, utilvalidation.IsValidCIDR(p.Index(i), strings.TrimSpace(v))...)
		}
	} else if val, ok := svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]; ok {
		p := field.NewPath("metadata", "annotations").Key(v1.AnnotationLoadBalancerSourceRangesKey)
		if spec.Type != v1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		if val = strings.TrimSpace(val); val != "" {
			for _, v := range strings.Split(val, ",") {
				errs = append(errs, utilvalidation.IsValidCIDR(p, strings.TrimSpace(v))...)
			}
		}
	}
	return errs
}

// svcValidateAllocateNodePorts: allocateLoadBalancerNodePorts is set on LoadBalancer
// services and only there.
func svcValidateAllocateNodePorts(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	if spec.AllocateLoadBalancerNodePorts != nil && spec.Type != v1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(svcSpecPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if spec.Type == v1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		// Kubernetes reports this one without the "spec." prefix.
		errs = append(errs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}
	return errs
}

// svcValidateTrafficDistribution: a set trafficDistribution is a known one.
func svcValidateTrafficDistribution(svc *v1.Service) field.ErrorList {
	if td := svc.Spec.TrafficDistribution; td != nil && !svcIn(*td, svcTrafficDistributions) {
		return field.ErrorList{field.NotSupported(svcSpecPath.Child("trafficDistribution"), *td, svcTrafficDistributions)}
	}
	return nil
}

// svcDuplicatePort has the field names and order of the internal core.ServicePort key
// Kubernetes reports for a duplicate port, so the value renders the same:
// {"Name":"","Protocol":"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}.
type svcDuplicatePort struct {
	Name        string
	Protocol    v1.Protocol
	AppProtocol *string
	Port        int32
	TargetPort  intstr.IntOrString
	NodePort    int32
}

func svcValidatePort(sp *v1.ServicePort, requireName bool, names map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && sp.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if sp.Name != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(sp.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), sp.Name, msg))
		}
		if names[sp.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), sp.Name))
		}
		names[sp.Name] = true
	}
	for _, msg := range utilvalidation.IsValidPortNum(int(sp.Port)) {
		errs = append(errs, field.Invalid(p.Child("port"), sp.Port, msg))
	}
	if sp.Protocol == "" {
		errs = append(errs, field.Required(p.Child("protocol"), ""))
	} else if !svcIn(string(sp.Protocol), svcProtocols) {
		errs = append(errs, field.NotSupported(p.Child("protocol"), sp.Protocol, svcProtocols))
	}
	errs = append(errs, svcValidatePortNumOrName(sp.TargetPort, p.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		for _, msg := range utilvalidation.IsQualifiedName(*sp.AppProtocol) {
			errs = append(errs, field.Invalid(p.Child("appProtocol"), *sp.AppProtocol, msg))
		}
	}
	return errs
}

// svcValidatePortNumOrName checks a port given as a number (1-65535) or as an IANA service
// name, with Kubernetes' messages.
func svcValidatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range utilvalidation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(p, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range utilvalidation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(p, port.StrVal, msg))
		}
	default:
		errs = append(errs, field.InternalError(p, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return errs
}

func svcValidateAffinityConfig(c *v1.SessionAffinityConfig, p *field.Path) field.ErrorList {
	const when = "when session affinity type is ClientIP"
	switch {
	case c == nil:
		return field.ErrorList{field.Required(p, when)}
	case c.ClientIP == nil:
		return field.ErrorList{field.Required(p.Child("clientIP"), when)}
	case c.ClientIP.TimeoutSeconds == nil:
		return field.ErrorList{field.Required(p.Child("clientIP", "timeoutSeconds"), when)}
	}
	if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > svcMaxAffinityTimeoutSecs {
		return field.ErrorList{field.Invalid(p.Child("clientIP", "timeoutSeconds"), t,
			fmt.Sprintf("must be greater than 0 and less than %d", svcMaxAffinityTimeoutSecs))}
	}
	return nil
}

// svcValidateNonSpecialIP refuses unspecified, loopback and link-local addresses, as
// Kubernetes does for external IPs and endpoints.
func svcValidateNonSpecialIP(ipAddress string, p *field.Path) field.ErrorList {
	ip := net.ParseIP(ipAddress)
	if ip == nil {
		return field.ErrorList{field.Invalid(p, ipAddress, "must be a valid IP address")}
	}
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(p, ipAddress, fmt.Sprintf("may not be unspecified (%v)", ipAddress)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(p, ipAddress, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(p, ipAddress, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(p, ipAddress, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// svcValidateClusterIPs checks clusterIP, clusterIPs, ipFamilies and ipFamilyPolicy
// (Kubernetes' ValidateServiceClusterIPsRelatedFields).
func svcValidateClusterIPs(svc *v1.Service) field.ErrorList {
	spec := &svc.Spec
	if spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsPath := field.NewPath("spec", "clusterIPs")
	famPath := field.NewPath("spec", "ipFamilies")
	if spec.ClusterIP != "" {
		if len(spec.ClusterIPs) == 0 {
			errs = append(errs, field.Required(ipsPath, ""))
		} else if spec.ClusterIPs[0] != spec.ClusterIP {
			errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(spec.ClusterIPs) != 0 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	seen := map[v1.IPFamily]bool{}
	for i, fam := range spec.IPFamilies {
		if !svcIn(string(fam), svcIPFamilies) {
			errs = append(errs, field.NotSupported(famPath.Index(i), fam, svcIPFamilies))
		}
		if seen[fam] {
			errs = append(errs, field.Duplicate(famPath.Index(i), fam))
		}
		seen[fam] = true
	}
	if pol := spec.IPFamilyPolicy; pol != nil && !svcIn(string(*pol), svcIPFamilyPolicies) {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "ipFamilyPolicy"), *pol, svcIPFamilyPolicies))
	}
	invalid := false
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == v1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				invalid = true
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		ipErrs := utilvalidation.IsValidIP(ipsPath.Index(i), ip)
		invalid = invalid || len(ipErrs) != 0
		errs = append(errs, ipErrs...)
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	// Family checks on addresses already known to be bad only repeat the same error.
	if invalid {
		return errs
	}
	if len(spec.ClusterIPs) == 2 && svcFamilyOf(net.ParseIP(spec.ClusterIPs[0])) == svcFamilyOf(net.ParseIP(spec.ClusterIPs[1])) {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
	}
	if !svcIsHeadless(svc) {
		for i, ip := range spec.ClusterIPs {
			if i >= len(spec.IPFamilies) {
				break
			}
			isV6 := svcFamilyOf(net.ParseIP(ip)) == v1.IPv6Protocol
			if spec.IPFamilies[i] == v1.IPv4Protocol && isV6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if spec.IPFamilies[i] == v1.IPv6Protocol && !isV6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return errs
}

func svcValidateLoadBalancerClass(svc *v1.Service) field.ErrorList {
	c := svc.Spec.LoadBalancerClass
	if c == nil {
		return nil
	}
	p := field.NewPath("spec", "loadBalancerClass")
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return field.ErrorList{field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(*c) {
		errs = append(errs, field.Invalid(p, *c, msg))
	}
	return errs
}

func svcValidateTrafficPolicies(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	if !svcExternallyAccessible(svc) {
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy,
				"may only be set for externally-accessible services"))
		}
	} else if spec.ExternalTrafficPolicy == "" {
		errs = append(errs, field.Required(specPath.Child("externalTrafficPolicy"), ""))
	} else if !svcIn(string(spec.ExternalTrafficPolicy), svcTrafficPolicies) {
		errs = append(errs, field.NotSupported(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy, svcTrafficPolicies))
	}
	if !ServiceNeedsHealthCheckNodePort(svc) {
		if spec.HealthCheckNodePort != 0 {
			errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	} else if spec.HealthCheckNodePort != 0 {
		// Kubernetes requires it here because its allocator ran before validation; ours
		// runs after, so 0 means "allocate one".
		for _, msg := range utilvalidation.IsValidPortNum(int(spec.HealthCheckNodePort)) {
			errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort, msg))
		}
	}
	itp := spec.InternalTrafficPolicy
	if itp == nil {
		// Not required for ExternalName: stored objects from before the field existed.
		if spec.Type == v1.ServiceTypeNodePort || spec.Type == v1.ServiceTypeLoadBalancer || spec.Type == v1.ServiceTypeClusterIP {
			errs = append(errs, field.Required(specPath.Child("internalTrafficPolicy"), ""))
		}
	} else if !svcIn(string(*itp), svcTrafficPolicies) {
		errs = append(errs, field.NotSupported(specPath.Child("internalTrafficPolicy"), *itp, svcTrafficPolicies))
	}
	return errs
}

// ValidateServiceUpdate checks an update: the new object as on create, plus the fields
// that may not change (cluster IPs and families, except across ExternalName;
// loadBalancerClass; healthCheckNodePort while it is needed).
func ValidateServiceUpdate(svc, oldSvc *v1.Service) field.ErrorList {
	if svc == nil || oldSvc == nil {
		return ValidateService(svc)
	}
	var errs field.ErrorList
	errs = append(errs, svcValidateClusterIPsUpdate(oldSvc, svc)...)
	errs = append(errs, svcValidateFamiliesUpdate(oldSvc, svc)...)
	if oldSvc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		a, b := oldSvc.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass
		if !((a == nil && b == nil) || (a != nil && b != nil && *a == *b)) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "loadBalancerClass"), b, "may not change once set"))
		}
	}
	if ServiceNeedsHealthCheckNodePort(oldSvc) && ServiceNeedsHealthCheckNodePort(svc) &&
		oldSvc.Spec.HealthCheckNodePort != svc.Spec.HealthCheckNodePort {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	return append(errs, ValidateService(svc)...)
}

func svcValidateClusterIPsUpdate(oldSvc, svc *v1.Service) field.ErrorList {
	if svc.Spec.Type == v1.ServiceTypeExternalName || oldSvc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	if svcIsHeadless(oldSvc) && svcIsHeadless(svc) {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "clusterIPs")
	oldIPs, ips := oldSvc.Spec.ClusterIPs, svc.Spec.ClusterIPs
	switch {
	case len(oldIPs) == len(ips):
		for i := range oldIPs {
			if oldIPs[i] != ips[i] {
				errs = append(errs, field.Invalid(p.Index(i), ips, "may not change once set"))
			}
		}
	case len(oldIPs) > len(ips):
		if len(ips) == 0 {
			errs = append(errs, field.Invalid(p.Index(0), ips, "primary clusterIP can not be unset"))
		}
		if len(oldIPs) > 0 && len(ips) > 0 && ips[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(p.Index(0), ips, "may not change once set"))
		}
		if len(ips) == 1 && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != v1.IPFamilyPolicySingleStack) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
				"must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(oldIPs) > 0 && ips[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(p.Index(0), ips, "may not change once set"))
		}
	}
	return errs
}

func svcValidateFamiliesUpdate(oldSvc, svc *v1.Service) field.ErrorList {
	if svc.Spec.Type == v1.ServiceTypeExternalName || oldSvc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	if svcIsHeadless(oldSvc) || svcIsHeadless(svc) {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "ipFamilies").Index(0)
	oldFams, fams := oldSvc.Spec.IPFamilies, svc.Spec.IPFamilies
	switch {
	case len(oldFams) == len(fams):
		for i := range oldFams {
			if oldFams[i] != fams[i] {
				errs = append(errs, field.Invalid(p, fams, "may not change once set"))
			}
		}
	case len(oldFams) > len(fams):
		if len(svc.Spec.ClusterIPs) == 0 {
			errs = append(errs, field.Invalid(p, fams, "primary ipFamily can not be unset"))
		}
		if len(fams) > 0 && fams[0] != oldFams[0] {
			errs = append(errs, field.Invalid(p, svc.Spec.ClusterIPs, "may not change once set"))
		}
		if len(fams) == 1 && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != v1.IPFamilyPolicySingleStack) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
				"must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(oldFams) > 0 && len(fams) > 0 && fams[0] != oldFams[0] {
			errs = append(errs, field.Invalid(p, svc.Spec.ClusterIPs, "may not change once set"))
		}
	}
	return errs
}

// ValidateServiceStatus checks a status write: load-balancer ingress points (valid IPs,
// ipMode only with an IP and VIP or Proxy, hostnames that are DNS names). Conditions are
// not checked, as kube-apiserver's ValidateServiceStatusUpdate does not: the conformance
// spec "should complete a service status lifecycle" writes one without
// lastTransitionTime.
func ValidateServiceStatus(svc *v1.Service) field.ErrorList {
	if svc == nil {
		return nil
	}
	var errs field.ErrorList
	ingPath := field.NewPath("status", "loadBalancer", "ingress")
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) != 0 {
		errs = append(errs, field.Forbidden(ingPath, "may only be used when `spec.type` is 'LoadBalancer'"))
	} else {
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			p := ingPath.Index(i)
			if ing.IP != "" {
				errs = append(errs, utilvalidation.IsValidIP(p.Child("ip"), ing.IP)...)
			}
			switch {
			case ing.IPMode == nil:
				if ing.IP != "" {
					errs = append(errs, field.Required(p.Child("ipMode"), "must be specified when `ip` is set"))
				}
			case ing.IP == "":
				errs = append(errs, field.Forbidden(p.Child("ipMode"), "may not be specified when `ip` is not set"))
			case !svcIn(string(*ing.IPMode), svcIPModes):
				errs = append(errs, field.NotSupported(p.Child("ipMode"), *ing.IPMode, svcIPModes))
			}
			if ing.Hostname != "" {
				for _, msg := range utilvalidation.IsDNS1123Subdomain(ing.Hostname) {
					errs = append(errs, field.Invalid(p.Child("hostname"), ing.Hostname, msg))
				}
				if net.ParseIP(ing.Hostname) != nil {
					errs = append(errs, field.Invalid(p.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
				}
			}
		}
	}
	return errs
}
