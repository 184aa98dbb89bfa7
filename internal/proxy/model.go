// Package proxy is tranche's service proxy: it tracks Services and EndpointSlices,
// computes which endpoints each service port sends to from this node, and programs one
// nftables table (`ip tranche`) with one transaction per sync. See README.md for the
// table layout, hooks and priorities.
package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one port of one service, the unit the proxy programs.
type ServicePortName struct {
	types.NamespacedName
	// Port is the port's name ("" for a single unnamed port).
	Port     string
	Protocol v1.Protocol
}

// String returns "ns/name:port/proto" with an empty port name kept, so that distinct
// ports never print alike.
func (n ServicePortName) String() string {
	return fmt.Sprintf("%s:%s/%s", n.NamespacedName.String(), n.Port, strings.ToLower(string(n.Protocol)))
}

// ServicePort is the proxy's view of one service port: only what the rules depend on.
type ServicePort struct {
	Name      ServicePortName
	ClusterIP netip.Addr
	Port      int32
	// NodePort is 0 when the service has none.
	NodePort        int32
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// SourceRanges restricts who may reach LoadBalancerIPs; empty means everyone.
	SourceRanges []netip.Prefix
	// AffinityTimeout is non-zero for sessionAffinity ClientIP.
	AffinityTimeout     time.Duration
	ExternalPolicyLocal bool
	InternalPolicyLocal bool
	// TrafficDistribution is the service's spec.trafficDistribution ("" when unset).
	TrafficDistribution string
	// HealthCheckNodePort is the service's spec.healthCheckNodePort (0 when none): the
	// node answers on it whether it has local endpoints, for external load balancers.
	HealthCheckNodePort int32
}

// externallyAccessible reports whether traffic can reach the port other than through
// its ClusterIP.
func (sp *ServicePort) externallyAccessible() bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

// usesClusterEndpoints and usesLocalEndpoints follow upstream's definitions: which of
// the two endpoint sets some traffic policy of the port needs.
func (sp *ServicePort) usesClusterEndpoints() bool {
	return !sp.InternalPolicyLocal || (sp.externallyAccessible() && !sp.ExternalPolicyLocal)
}

func (sp *ServicePort) usesLocalEndpoints() bool {
	return sp.InternalPolicyLocal || (sp.externallyAccessible() && sp.ExternalPolicyLocal)
}

// Endpoint is one backend address and port of a service port, with its conditions.
type Endpoint struct {
	IP   netip.Addr
	Port int32
	// Ready, Serving and Terminating are the EndpointSlice conditions with upstream's
	// defaults for unset values (ready and serving when unknown, not terminating).
	Ready       bool
	Serving     bool
	Terminating bool
	NodeName    string
	Zone        string
	// ZoneHints and NodeHints are sorted; empty when the slice gives none.
	ZoneHints []string
	NodeHints []string
}

// String returns "ip:port".
func (e Endpoint) String() string {
	return netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
}

// compareEndpoints orders endpoints by address then port, the order the rules list them.
func compareEndpoints(a, b Endpoint) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

// Service-level labels and annotations the proxy honours.
const (
	// LabelServiceProxyName marks a service handled by another proxy; tranche skips it.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// AnnotationLastChangeTriggerTime is set by the EndpointSlice controller to the time
	// of the change that caused the slice update; it feeds the programming-latency metric.
	AnnotationLastChangeTriggerTime = "endpoints.kubernetes.io/last-change-trigger-time"
)

// servicePorts converts a Service into its proxied ports, or nil when the proxy must
// ignore it (headless, ExternalName, no IPv4 ClusterIP, or another proxy's service).
func servicePorts(svc *v1.Service) map[ServicePortName]*ServicePort {
	if svc == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	if _, ok := svc.Labels[LabelServiceProxyName]; ok {
		return nil
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !clusterIP.Is4() {
		return nil
	}
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	var externalIPs, lbIPs []netip.Addr
	for _, s := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			externalIPs = append(externalIPs, a)
		}
	}
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(ing.IP); err == nil && a.Is4() {
				lbIPs = append(lbIPs, a)
			}
		}
	}
	var ranges []netip.Prefix
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && p.Addr().Is4() {
			ranges = append(ranges, p.Masked())
		}
	}
	var affinity time.Duration
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		affinity = time.Duration(v1.DefaultClientIPServiceAffinitySeconds) * time.Second
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
			affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	var distribution string
	if svc.Spec.TrafficDistribution != nil {
		distribution = *svc.Spec.TrafficDistribution
	}
	external := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(externalIPs) > 0
	ports := make(map[ServicePortName]*ServicePort, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP {
			continue
		}
		if p.Port < 1 || p.Port > 65535 {
			continue
		}
		spn := ServicePortName{NamespacedName: name, Port: p.Name, Protocol: proto}
		sp := &ServicePort{
			Name:                spn,
			ClusterIP:           clusterIP,
			Port:                p.Port,
			ExternalIPs:         externalIPs,
			LoadBalancerIPs:     lbIPs,
			SourceRanges:        ranges,
			AffinityTimeout:     affinity,
			InternalPolicyLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
			TrafficDistribution: distribution,
		}
		if hc := svc.Spec.HealthCheckNodePort; hc >= 1 && hc <= 65535 && external &&
			svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			sp.HealthCheckNodePort = hc
		}
		if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			if p.NodePort >= 1 && p.NodePort <= 65535 {
				sp.NodePort = p.NodePort
			}
		}
		// Upstream ignores externalTrafficPolicy unless the service is reachable from
		// outside; keep the same so that a ClusterIP service never grows an ext chain.
		sp.ExternalPolicyLocal = external && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
		ports[spn] = sp
	}
	return ports
}

// sortedStrings returns a sorted copy (nil for empty input) so that equal hint sets
// compare equal.
func sortedStrings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
