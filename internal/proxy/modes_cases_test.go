package proxy

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// modeCase is one scenario of a mode's golden test: Services and EndpointSlices, and
// packets whose fates the mode's tracer (nftables) or walker (iptables) must find.
type modeCase struct {
	name   string
	svcs   []*v1.Service
	slices []*discoveryv1.EndpointSlice
	traces []traceCase
}

// sharedCase returns a scenario that the nftables and iptables golden tests (and, for
// its Services, the ipvs one) run alike: the same objects and the same expected fates,
// written once.
func sharedCase(ns, name string) modeCase {
	for _, c := range []modeCase{
		{
			name: "nodeport",
			svcs: []*v1.Service{makeService(ns, "web", "10.96.0.20", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "web", "web-1", httpPorts, ready("10.244.2.5", "node-b"))},
			traces: []traceCase{
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30080), "accept dnat 10.244.2.5:8080 masquerade"},
				{pkt("10.244.1.9", "10.96.0.20", "tcp", 80), "accept dnat 10.244.2.5:8080"},
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30081), "accept"},
			},
		},
		{
			name: "loadbalancer-source-ranges",
			svcs: []*v1.Service{makeService(ns, "lb", "10.96.0.30", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30090
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/16", "172.16.1.1/32"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.1"}}
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "lb", "lb-1", httpPorts, ready("10.244.2.5", "node-b"))},
			traces: []traceCase{
				{pkt("192.168.7.1", "127.0.10.1", "tcp", 80), "accept dnat 10.244.2.5:8080 masquerade"},
				{pkt("172.16.1.1", "127.0.10.1", "tcp", 80), "accept dnat 10.244.2.5:8080 masquerade"},
				{pkt("172.16.1.2", "127.0.10.1", "tcp", 80), "drop"},
				// No range contains the node's address: the VIP as a source is not admitted.
				{pkt("127.0.10.1", "127.0.10.1", "tcp", 80), "drop"},
			},
		},
		{
			// A range contains the node's address (10.240.0.2): the load balancer IP as
			// a source is admitted too, as kube-proxy does for VIPs that are local
			// addresses (a request from the node loops back with the VIP as source).
			name: "loadbalancer-source-ranges-node",
			svcs: []*v1.Service{makeService(ns, "lbn", "10.96.0.31", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30091
				s.Spec.LoadBalancerSourceRanges = []string{"10.240.0.0/24"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.2"}}
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "lbn", "lbn-1", httpPorts, ready("10.244.2.5", "node-b"))},
			traces: []traceCase{
				{pkt("10.240.0.2", "127.0.10.2", "tcp", 80), "accept dnat 10.244.2.5:8080 masquerade"},
				{pkt("127.0.10.2", "127.0.10.2", "tcp", 80), "accept dnat 10.244.2.5:8080 masquerade"},
				{pkt("192.168.7.1", "127.0.10.2", "tcp", 80), "drop"},
			},
		},
		{
			name: "session-affinity",
			svcs: []*v1.Service{makeService(ns, "sticky", "10.96.0.40", func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "sticky", "sticky-1", httpPorts,
				ready("10.244.1.7", testNode), ready("10.244.2.7", "node-b"))},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.40", "tcp", 80), "accept dnat 10.244.1.7:8080 | accept dnat 10.244.2.7:8080"},
				{pkt("10.244.1.7", "10.96.0.40", "tcp", 80), "accept dnat 10.244.1.7:8080 masquerade | accept dnat 10.244.2.7:8080"},
			},
		},
	} {
		if c.name == name {
			return c
		}
	}
	panic("no shared case " + name)
}
