package core

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// ServiceResource returns the core/v1 Service resource: defaulting, type-transition
// clean-up, validation and the kubectl table, all as Kubernetes does them. ClusterIPs,
// NodePorts and HealthCheckNodePorts are allocated elsewhere (the allocator uses
// ServiceNeedsClusterIP, ServiceNeedsNodePorts and ServiceNeedsHealthCheckNodePort).
func ServiceResource() registry.Resource {
	return registry.Resource{
		GVK:              schema.GroupVersionKind{Version: "v1", Kind: "Service"},
		Plural:           "services",
		Singular:         "service",
		ShortNames:       []string{"svc"},
		Categories:       []string{"all"},
		Namespaced:       true,
		New:              func() runtime.Object { return &v1.Service{} },
		NewList:          func() runtime.Object { return &v1.ServiceList{} },
		NameValidation:   apivalidation.NameIsDNS1035Label,
		PrepareForCreate: svcPrepareForCreate,
		PrepareForUpdate: svcPrepareForUpdate,
		Default:          registry.Hook(DefaultService),
		Validate:         registry.Func(ValidateService),
		ValidateUpdate:   registry.FuncUpdate(ValidateServiceUpdate),
		Warnings: func(obj, old runtime.Object) []string {
			return ServiceWarnings(svcFrom(obj))
		},
		Status: &registry.StatusStrategy{
			PrepareForUpdate: registry.HookUpdate(func(s, _ *v1.Service) {
				svcDefaultIPMode(s)
			}),
			ValidateUpdate: registry.FuncUpdate(func(obj, _ *v1.Service) field.ErrorList { return ValidateServiceStatus(obj) }),
		},
		Handlers: ServiceHandlers(),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Type", Type: "string", Description: v1.ServiceSpec{}.SwaggerDoc()["type"]},
			{Name: "Cluster-IP", Type: "string", Description: v1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
			{Name: "External-IP", Type: "string", Description: v1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
			{Name: "Port(s)", Type: "string", Description: v1.ServiceSpec{}.SwaggerDoc()["ports"]},
			registry.AgeColumn,
			{Name: "Selector", Type: "string", Priority: 1, Description: v1.ServiceSpec{}.SwaggerDoc()["selector"]},
		},
		Row: registry.FuncWith(func(s *v1.Service, now time.Time) []interface{} {
			return svcRow(s, now)
		}),
		Fields: registry.Func(func(s *v1.Service) fields.Set {
			return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
		}),
	}
}

// svcFrom returns obj as a Service, or nil when it is anything else.
func svcFrom(obj runtime.Object) *v1.Service {
	s, _ := obj.(*v1.Service)
	return s
}

// ServiceNeedsClusterIP reports whether the allocator must give svc a cluster IP: every
// type but ExternalName, unless the service is headless (clusterIP "None").
func ServiceNeedsClusterIP(svc *v1.Service) bool {
	if svc == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != v1.ClusterIPNone
}

// ServiceNeedsNodePorts reports whether the allocator must give each port of svc a
// node port: NodePort services, and LoadBalancer services unless
// allocateLoadBalancerNodePorts is false.
func ServiceNeedsNodePorts(svc *v1.Service) bool {
	if svc == nil {
		return false
	}
	switch svc.Spec.Type {
	case v1.ServiceTypeNodePort:
		return true
	case v1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

// ServiceNeedsHealthCheckNodePort reports whether svc needs a health-check node port:
// LoadBalancer services with externalTrafficPolicy Local.
func ServiceNeedsHealthCheckNodePort(svc *v1.Service) bool {
	return svc != nil && svc.Spec.Type == v1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// svcHoldsClusterIP is Kubernetes' notion of "may hold cluster IPs" used when deciding
// what a type change releases: everything but ExternalName, headless included.
func svcHoldsClusterIP(svc *v1.Service) bool {
	return svc.Spec.Type != v1.ServiceTypeExternalName
}

// svcHoldsNodePorts is true for the types whose ports may carry node ports.
func svcHoldsNodePorts(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer
}

// svcExternallyAccessible mirrors Kubernetes: reachable from outside through node ports,
// a load balancer or external IPs.
func svcExternallyAccessible(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer || svc.Spec.Type == v1.ServiceTypeNodePort ||
		(svc.Spec.Type == v1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// svcIsHeadless is validation's test: clusterIPs is exactly ["None"].
func svcIsHeadless(svc *v1.Service) bool {
	return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == v1.ClusterIPNone
}

// DefaultService fills the defaults Kubernetes' defaulters and allocator pre-checks set
// on a Service. It is idempotent and does nothing for a nil service.
func DefaultService(svc *v1.Service) {
	if svc == nil {
		return
	}
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = v1.ServiceAffinityNone
	}
	if spec.SessionAffinity == v1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == v1.ServiceAffinityClientIP {
		c := spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			timeout := v1.DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
	}
	if spec.Type == "" {
		spec.Type = v1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if svcExternallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil && (spec.Type == v1.ServiceTypeNodePort ||
		spec.Type == v1.ServiceTypeLoadBalancer || spec.Type == v1.ServiceTypeClusterIP) {
		p := v1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	if spec.Type == v1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
	svcDefaultIPMode(svc)
	svcDefaultIPFamilies(svc)
}

// svcDefaultIPMode sets ipMode VIP on load-balancer ingress points that have an IP.
func svcDefaultIPMode(svc *v1.Service) {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" && ing.IPMode == nil {
			m := v1.LoadBalancerIPModeVIP
			svc.Status.LoadBalancer.Ingress[i].IPMode = &m
		}
	}
}

// svcDefaultIPFamilies does what Kubernetes' allocator does before allocating on a
// single-stack IPv4 cluster: policy SingleStack (RequireDualStack for a headless service
// without selector), families inferred from the given cluster IPs, else IPv4; headless
// selector-less services that are not SingleStack get both families.
func svcDefaultIPFamilies(svc *v1.Service) {
	spec := &svc.Spec
	if spec.Type == v1.ServiceTypeExternalName {
		return
	}
	headlessNoSelector := spec.ClusterIP == v1.ClusterIPNone && len(spec.Selector) == 0
	if spec.IPFamilyPolicy == nil {
		p := v1.IPFamilyPolicySingleStack
		if headlessNoSelector {
			p = v1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &p
	}
	for i, ip := range spec.ClusterIPs {
		if ip == v1.ClusterIPNone {
			break
		}
		parsed := net.ParseIP(ip)
		if parsed == nil {
			break
		}
		if i >= len(spec.IPFamilies) {
			spec.IPFamilies = append(spec.IPFamilies, svcFamilyOf(parsed))
		}
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	}
	if headlessNoSelector && len(spec.IPFamilies) == 1 && *spec.IPFamilyPolicy != v1.IPFamilyPolicySingleStack {
		if spec.IPFamilies[0] == v1.IPv4Protocol {
			spec.IPFamilies = append(spec.IPFamilies, v1.IPv6Protocol)
		} else {
			spec.IPFamilies = append(spec.IPFamilies, v1.IPv4Protocol)
		}
	}
}

func svcFamilyOf(ip net.IP) v1.IPFamily {
	if ip.To4() != nil {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// svcPrepareForCreate fills clusterIPs from clusterIP for clients that only set the
// singular field, as Kubernetes' strategy does.
func svcPrepareForCreate(obj runtime.Object) {
	svc := svcFrom(obj)
	if svc == nil {
		return
	}
	svc.Status = v1.ServiceStatus{}
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// svcPrepareForUpdate keeps allocated values a client left out, keeps clusterIP and
// clusterIPs in step, and releases what a type change makes useless, only when the
// client did not change it itself (Kubernetes' patchAllocatedValues,
// NormalizeClusterIPs and dropTypeDependentFields).
func svcPrepareForUpdate(obj, old runtime.Object) {
	svc, oldSvc := svcFrom(obj), svcFrom(old)
	if svc == nil || oldSvc == nil {
		return
	}
	svcPatchAllocated(svc, oldSvc)
	svcNormalizeClusterIPs(svc, oldSvc)
	svcDropTypeDependent(svc, oldSvc)
}

func svcPatchAllocated(svc, oldSvc *v1.Service) {
	if svcHoldsClusterIP(oldSvc) && svcHoldsClusterIP(svc) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = oldSvc.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && len(oldSvc.Spec.ClusterIPs) > 0 {
			svc.Spec.ClusterIPs = append([]string(nil), oldSvc.Spec.ClusterIPs...)
		}
		// An update without a policy adopts the old one rather than a default, so a
		// client that never heard of dual-stack cannot change it by accident.
		if svc.Spec.IPFamilyPolicy == nil && oldSvc.Spec.IPFamilyPolicy != nil {
			p := *oldSvc.Spec.IPFamilyPolicy
			svc.Spec.IPFamilyPolicy = &p
		}
	}
	if svcHoldsNodePorts(oldSvc) && svcHoldsNodePorts(svc) {
		inNew := map[int32]bool{}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				inNew[p.NodePort] = true
			}
		}
		byName := map[string]int32{}
		for _, p := range oldSvc.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort == 0 && !inNew[byName[p.Name]] {
				p.NodePort = byName[p.Name]
			}
		}
	}
	if ServiceNeedsHealthCheckNodePort(oldSvc) && ServiceNeedsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = oldSvc.Spec.HealthCheckNodePort
	}
}

func svcNormalizeClusterIPs(svc, oldSvc *v1.Service) {
	if len(oldSvc.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) == 0 && oldSvc.Spec.ClusterIP == svc.Spec.ClusterIP {
		svc.Spec.ClusterIPs = append([]string(nil), oldSvc.Spec.ClusterIPs...)
	}
	if oldSvc.Spec.ClusterIP == svc.Spec.ClusterIP {
		return
	}
	same := svcSameStrings(oldSvc.Spec.ClusterIPs, svc.Spec.ClusterIPs)
	if oldSvc.Spec.ClusterIP != "" && svc.Spec.ClusterIP == "" && same {
		svc.Spec.ClusterIPs = nil
	}
	if svc.Spec.ClusterIP != "" && same {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

func svcDropTypeDependent(svc, oldSvc *v1.Service) {
	if svcHoldsClusterIP(oldSvc) && !svcHoldsClusterIP(svc) {
		if svcSameStrings(oldSvc.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
			svc.Spec.ClusterIP = ""
			svc.Spec.ClusterIPs = nil
		}
		if svcSameFamilies(oldSvc.Spec.IPFamilies, svc.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if svcSameFamilyPolicy(oldSvc.Spec.IPFamilyPolicy, svc.Spec.IPFamilyPolicy) {
			svc.Spec.IPFamilyPolicy = nil
		}
	}
	if svcHoldsNodePorts(oldSvc) && !svcHoldsNodePorts(svc) && svcNoNewNodePorts(oldSvc, svc) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if ServiceNeedsHealthCheckNodePort(oldSvc) && !ServiceNeedsHealthCheckNodePort(svc) &&
		oldSvc.Spec.HealthCheckNodePort == svc.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if oldSvc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		a, b := oldSvc.Spec.AllocateLoadBalancerNodePorts, svc.Spec.AllocateLoadBalancerNodePorts
		if a != nil && b != nil && *a == *b {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		a2, b2 := oldSvc.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass
		if (a2 == nil && b2 == nil) || (a2 != nil && b2 != nil && *a2 == *b2) {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if svcExternallyAccessible(oldSvc) && !svcExternallyAccessible(svc) &&
		oldSvc.Spec.ExternalTrafficPolicy == svc.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	// Load-balancer de-provisioning is asynchronous, but clients need not see that.
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer = v1.LoadBalancerStatus{}
	}
}

func svcSameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func svcSameFamilies(a, b []v1.IPFamily) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func svcSameFamilyPolicy(a, b *v1.IPFamilyPolicy) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// svcNoNewNodePorts is true when svc only keeps or drops node ports old already had,
// i.e. the client did not ask for any node port itself.
func svcNoNewNodePorts(oldSvc, svc *v1.Service) bool {
	had := map[int32]bool{}
	for _, p := range oldSvc.Spec.Ports {
		if p.NodePort != 0 {
			had[p.NodePort] = true
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !had[p.NodePort] {
			return false
		}
	}
	return true
}

// ServiceWarnings returns the warnings Kubernetes sends back for a Service create or
// update (deprecated fields, ignored fields, non-canonical IPs).
func ServiceWarnings(svc *v1.Service) []string {
	if svc == nil {
		return nil
	}
	var warnings []string
	spec := &svc.Spec
	if _, ok := svc.Annotations[v1.DeprecatedAnnotationTopologyAwareHints]; ok {
		warnings = append(warnings, fmt.Sprintf("annotation %s is deprecated, please use %s instead",
			v1.DeprecatedAnnotationTopologyAwareHints, v1.AnnotationTopologyMode))
	}
	if len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] != v1.ClusterIPNone {
		for i, ip := range spec.ClusterIPs {
			warnings = append(warnings, utilvalidation.GetWarningsForIP(field.NewPath("spec", "clusterIPs").Index(i), ip)...)
		}
	}
	headless := spec.Type == v1.ServiceTypeClusterIP && spec.ClusterIP == v1.ClusterIPNone
	if headless {
		if spec.LoadBalancerIP != "" {
			warnings = append(warnings, "spec.loadBalancerIP is ignored for headless services")
		}
		if len(spec.ExternalIPs) > 0 {
			warnings = append(warnings, "spec.externalIPs is ignored for headless services")
		}
		if spec.SessionAffinity != v1.ServiceAffinityNone {
			warnings = append(warnings, "spec.SessionAffinity is ignored for headless services")
		}
	}
	for i, ip := range spec.ExternalIPs {
		warnings = append(warnings, utilvalidation.GetWarningsForIP(field.NewPath("spec", "externalIPs").Index(i), ip)...)
	}
	if len(spec.ExternalIPs) > 0 && !headless && spec.Type != v1.ServiceTypeExternalName {
		warnings = append(warnings, "spec.externalIPs is deprecated and may no longer be implemented in some clusters")
	}
	if spec.LoadBalancerIP != "" {
		warnings = append(warnings, utilvalidation.GetWarningsForIP(field.NewPath("spec", "loadBalancerIP"), spec.LoadBalancerIP)...)
	}
	for i, cidr := range spec.LoadBalancerSourceRanges {
		warnings = append(warnings, utilvalidation.GetWarningsForCIDR(field.NewPath("spec", "loadBalancerSourceRanges").Index(i), cidr)...)
	}
	if spec.Type == v1.ServiceTypeExternalName && len(spec.ExternalIPs) > 0 {
		warnings = append(warnings, fmt.Sprintf("spec.externalIPs is ignored when spec.type is %q", v1.ServiceTypeExternalName))
	}
	if spec.Type != v1.ServiceTypeExternalName && spec.ExternalName != "" {
		warnings = append(warnings, fmt.Sprintf("spec.externalName is ignored when spec.type is not %q", v1.ServiceTypeExternalName))
	}
	if spec.TrafficDistribution != nil && *spec.TrafficDistribution == v1.ServiceTrafficDistributionPreferClose {
		warnings = append(warnings, fmt.Sprintf("spec.trafficDistribution: %q is deprecated; use %q",
			v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameZone))
	}
	return warnings
}

// svcRow computes kubectl's cells: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR.
func svcRow(svc *v1.Service, now time.Time) []interface{} {
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	ports := svcPortString(svc.Spec.Ports)
	if ports == "" {
		ports = "<none>"
	}
	return []interface{}{svc.Name, string(svc.Spec.Type), clusterIP, svcExternalIP(svc), ports,
		registry.HumanAge(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector)}
}

// svcExternalIP is the EXTERNAL-IP cell (the server prints tables wide, so nothing is
// truncated).
func svcExternalIP(svc *v1.Service) string {
	switch svc.Spec.Type {
	case v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case v1.ServiceTypeLoadBalancer:
		var results []string
		results = append(results, svcLoadBalancerAddresses(svc.Status.LoadBalancer)...)
		results = append(results, svc.Spec.ExternalIPs...)
		if len(results) == 0 {
			return "<pending>"
		}
		return strings.Join(results, ",")
	case v1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// svcLoadBalancerAddresses returns the sorted, de-duplicated ingress IPs (or hostnames).
func svcLoadBalancerAddresses(s v1.LoadBalancerStatus) []string {
	seen := map[string]bool{}
	var out []string
	for _, ing := range s.Ingress {
		v := ing.IP
		if v == "" {
			v = ing.Hostname
		}
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func svcPortString(ports []v1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}
