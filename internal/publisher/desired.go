package publisher

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LabelExcludeFromExternalLoadBalancers is the well-known Node label that keeps a node
// out of load balancers' backends; NodePorts on 127.0.0.1 still use it.
const LabelExcludeFromExternalLoadBalancers = "node.kubernetes.io/exclude-from-external-load-balancers"

// Listener is one socket the publisher holds on the host.
type Listener struct {
	// Protocol is TCP or UDP.
	Protocol v1.Protocol
	// Addr is the host address and port.
	Addr netip.AddrPort
}

func (l Listener) String() string { return l.Addr.String() + "/" + string(l.Protocol) }

// Target is where a Listener's connections go.
type Target struct {
	// Service owns the listener; Events about it go there.
	Service types.NamespacedName
	// UID is the Service's, for Events.
	UID types.UID
	// Port names the Service port (its name, else its number), for logs.
	Port string
	// NodePort is the port dialled on the nodes; 0 when the Service has no node port
	// (allocateLoadBalancerNodePorts: false) and Backends are endpoints.
	NodePort int32
	// Backends are the addresses dialled inside the cluster network, sorted: nodes'
	// underlay addresses with NodePort, or endpoints' addresses with their port.
	// Empty means connections are refused.
	Backends []netip.AddrPort
	// SourceRanges limit the clients of a load-balancer address
	// (spec.loadBalancerSourceRanges); empty allows every client.
	SourceRanges []netip.Prefix
}

// Conflict is a listener two Services want; Loser does not get it.
type Conflict struct {
	Listener Listener
	Winner   types.NamespacedName
	Loser    types.NamespacedName
	LoserUID types.UID
}

// Input is what Desired computes from.
type Input struct {
	Services []*v1.Service
	Slices   []*discoveryv1.EndpointSlice
	Nodes    []*v1.Node
	// NodePortAddress is the host address NodePorts are published on (127.0.0.1); an
	// invalid address publishes none.
	NodePortAddress netip.Addr
	// Publishable says which load-balancer addresses of Services' status are the host's
	// to listen on; nil means loopback addresses only.
	Publishable func(netip.Addr) bool
}

// Desired returns the listeners the host should have and where each one forwards, for
// every NodePort and LoadBalancer Service, TCP and UDP (other protocols are not
// published):
//   - each port with a node port is published on NodePortAddress:nodePort;
//   - each publishable address of status.loadBalancer.ingress is published on
//     address:port;
//   - connections go to every Ready node's InternalIP and the node port, or, with
//     externalTrafficPolicy Local, only to the nodes that have a ready endpoint of
//     the Service (load-balancer listeners also leave out nodes labelled
//     LabelExcludeFromExternalLoadBalancers, as cloud load balancers do);
//   - a load-balancer port without a node port goes straight to the ready endpoints.
//
// When two Services want one listener, the older one (then the lower namespace/name)
// gets it and the other is reported in the conflicts.
func Desired(in Input) (map[Listener]Target, []Conflict) {
	publishable := in.Publishable
	if publishable == nil {
		publishable = netip.Addr.IsLoopback
	}
	svcs := slices.Clone(in.Services)
	slices.SortFunc(svcs, func(a, b *v1.Service) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slicesBySvc := map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for _, s := range in.Slices {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			k := types.NamespacedName{Namespace: s.Namespace, Name: name}
			slicesBySvc[k] = append(slicesBySvc[k], s)
		}
	}
	nodes := usableNodes(in.Nodes)

	out := map[Listener]Target{}
	var conflicts []Conflict
	add := func(l Listener, t Target) {
		if prev, ok := out[l]; ok {
			if prev.Service != t.Service {
				conflicts = append(conflicts, Conflict{Listener: l, Winner: prev.Service, Loser: t.Service, LoserUID: t.UID})
			}
			return
		}
		out[l] = t
	}
	for _, svc := range svcs {
		if svc.DeletionTimestamp != nil || (svc.Spec.Type != v1.ServiceTypeNodePort && svc.Spec.Type != v1.ServiceTypeLoadBalancer) {
			continue
		}
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		local := svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
		var lbAddrs []netip.Addr
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			for _, ing := range svc.Status.LoadBalancer.Ingress {
				if a, err := netip.ParseAddr(ing.IP); err == nil && publishable(a.Unmap()) {
					lbAddrs = append(lbAddrs, a.Unmap())
				}
			}
		}
		ranges := sourceRanges(svc)
		for _, sp := range svc.Spec.Ports {
			if sp.Protocol != v1.ProtocolTCP && sp.Protocol != v1.ProtocolUDP {
				continue
			}
			eps := readyEndpoints(slicesBySvc[key], sp)
			base := Target{Service: key, UID: svc.UID, Port: portName(sp), NodePort: sp.NodePort}
			if sp.NodePort != 0 {
				if in.NodePortAddress.IsValid() {
					t := base
					t.Backends = nodeBackends(nodes, eps, local, false, sp.NodePort)
					add(Listener{Protocol: sp.Protocol, Addr: netip.AddrPortFrom(in.NodePortAddress, uint16(sp.NodePort))}, t)
				}
			}
			if len(lbAddrs) == 0 {
				continue
			}
			t := base
			t.SourceRanges = ranges
			if sp.NodePort != 0 {
				t.Backends = nodeBackends(nodes, eps, local, true, sp.NodePort)
			} else {
				t.Backends = endpointBackends(eps)
			}
			for _, a := range lbAddrs {
				add(Listener{Protocol: sp.Protocol, Addr: netip.AddrPortFrom(a, uint16(sp.Port))}, t)
			}
		}
	}
	return out, conflicts
}

// Skipped is a port of a NodePort or LoadBalancer Service that the host does not get:
// the publisher forwards TCP and UDP only (SCTP is left to clients inside the
// cluster network).
type Skipped struct {
	Service  types.NamespacedName
	UID      types.UID
	Port     string // the port's name, else its number
	Protocol v1.Protocol
	Number   int32
}

// Unpublished returns the ports of svcs that Desired leaves out for their protocol,
// so that the Service can say so rather than be silently unreachable from the host.
func Unpublished(svcs []*v1.Service) []Skipped {
	var out []Skipped
	for _, svc := range svcs {
		if svc.DeletionTimestamp != nil || (svc.Spec.Type != v1.ServiceTypeNodePort && svc.Spec.Type != v1.ServiceTypeLoadBalancer) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if sp.Protocol != v1.ProtocolTCP && sp.Protocol != v1.ProtocolUDP {
				out = append(out, Skipped{Service: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, UID: svc.UID,
					Port: portName(sp), Protocol: sp.Protocol, Number: sp.Port})
			}
		}
	}
	return out
}

// node is a node connections may be sent to.
type node struct {
	name     string
	addr     netip.Addr
	excluded bool // labelled LabelExcludeFromExternalLoadBalancers
}

// usableNodes returns the Ready nodes, not being deleted, with an IPv4 InternalIP.
func usableNodes(nodes []*v1.Node) []node {
	var out []node
	for _, n := range nodes {
		if n.DeletionTimestamp != nil || !nodeReady(n) {
			continue
		}
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if a.Type != v1.NodeInternalIP || err != nil || !ip.Unmap().Is4() {
				continue
			}
			_, excluded := n.Labels[LabelExcludeFromExternalLoadBalancers]
			out = append(out, node{name: n.Name, addr: ip.Unmap(), excluded: excluded})
			break
		}
	}
	return out
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// endpoint is a ready endpoint of one Service port.
type endpoint struct {
	addr netip.AddrPort
	node string
}

// readyEndpoints returns the ready endpoints of the service port sp: the IPv4
// addresses of ready endpoints in slices that carry a port of sp's name and protocol.
func readyEndpoints(slices []*discoveryv1.EndpointSlice, sp v1.ServicePort) []endpoint {
	var out []endpoint
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := int32(0)
		for _, p := range s.Ports {
			name, proto := "", v1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if name == sp.Name && proto == sp.Protocol && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if port <= 0 || port > 65535 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			nodeName := ""
			if e.NodeName != nil {
				nodeName = *e.NodeName
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
					out = append(out, endpoint{addr: netip.AddrPortFrom(ip, uint16(port)), node: nodeName})
				}
			}
		}
	}
	return out
}

// nodeBackends returns node:nodePort for every usable node, or with local only for
// the nodes that run one of eps; forLB leaves out excluded nodes.
func nodeBackends(nodes []node, eps []endpoint, local, forLB bool, nodePort int32) []netip.AddrPort {
	hasLocal := map[string]bool{}
	for _, e := range eps {
		hasLocal[e.node] = true
	}
	var out []netip.AddrPort
	for _, n := range nodes {
		if (forLB && n.excluded) || (local && !hasLocal[n.name]) {
			continue
		}
		out = append(out, netip.AddrPortFrom(n.addr, uint16(nodePort)))
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// endpointBackends returns the endpoints' addresses, sorted and distinct.
func endpointBackends(eps []endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.addr)
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out)
}

// sourceRanges parses spec.loadBalancerSourceRanges; an unparsable entry is skipped
// (validation refuses them; nothing here may crash on one).
func sourceRanges(svc *v1.Service) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func portName(sp v1.ServicePort) string {
	if sp.Name != "" {
		return sp.Name
	}
	return strconv.Itoa(int(sp.Port))
}

// allowed reports whether a client address may use a target.
func (t *Target) allowed(client netip.Addr) bool {
	if len(t.SourceRanges) == 0 {
		return true
	}
	client = client.Unmap()
	for _, p := range t.SourceRanges {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

// describe says where a target forwards, for Events and logs.
func (t *Target) describe() string {
	if t.NodePort != 0 {
		return fmt.Sprintf("node port %d of %d nodes", t.NodePort, len(t.Backends))
	}
	return fmt.Sprintf("%d ready endpoints", len(t.Backends))
}
