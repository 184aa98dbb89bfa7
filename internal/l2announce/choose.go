// Package l2announce makes a LoadBalancer Service's pool addresses reachable on a LAN, as
// MetalLB's layer 2 mode: for each address exactly one Ready node, chosen the same way by
// every agent from the same Nodes, Services and EndpointSlices, holds it on its uplink
// (so its kernel answers ARP for it) and sends a gratuitous ARP when it takes it over.
// The node's proxy then takes the traffic as for any other LoadBalancer address.
package l2announce

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/tranche/tranche/internal/overlay"
)

// ExcludeLabel keeps a node out of the choice, as for cloud load balancers.
const ExcludeLabel = v1.LabelNodeExcludeBalancers

// Choose returns the node that announces addr among candidates (rendezvous hashing: a
// node leaving moves only its own addresses), or "" when there is none. The address
// alone is hashed, not its Service, so that Services sharing an address (different
// ports) are announced by the same node, as MetalLB.
func Choose(addr netip.Addr, candidates []string) string {
	var best string
	var bestScore uint64
	for _, n := range candidates {
		sum := sha256.Sum256([]byte(n + "\x00" + addr.String()))
		s := binary.BigEndian.Uint64(sum[:8])
		if best == "" || s > bestScore || (s == bestScore && n < best) {
			best, bestScore = n, s
		}
	}
	return best
}

// Candidates are the nodes that may announce: Ready, running a pod network across
// machines (the overlay's public-ip annotation; `tranche up`'s nodes do not announce),
// not being deleted and not labelled ExcludeLabel.
func Candidates(nodes []*v1.Node) []string {
	var out []string
	for _, n := range nodes {
		if n.DeletionTimestamp != nil || n.Annotations[overlay.AnnotationPublicIP] == "" {
			continue
		}
		if _, ok := n.Labels[ExcludeLabel]; ok {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// Desired returns the addresses node me announces, each with its Service's key: the
// IPv4 ingress addresses of LoadBalancer Services that lie on lan (the uplink's subnet:
// an address elsewhere is not answered for on this link) and are no node's own address
// (ServiceLB's node addresses need no announcing), chosen to me. With
// externalTrafficPolicy Local only candidates with a ready endpoint of the Service
// announce it, as MetalLB does.
func Desired(me string, lan netip.Prefix, nodes []*v1.Node, svcs []*v1.Service, slices []*discovery.EndpointSlice) map[netip.Addr]string {
	nodeAddrs := map[netip.Addr]bool{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				nodeAddrs[ip] = true
			}
		}
	}
	cands := Candidates(nodes)
	local := localEndpoints(slices)
	// Services sharing an address (different ports) are announced together: by a node
	// that every Local one among them may use.
	keys := map[netip.Addr]string{}
	allowed := map[netip.Addr]func(string) bool{}
	for _, s := range svcs {
		if s.Spec.Type != v1.ServiceTypeLoadBalancer || s.DeletionTimestamp != nil {
			continue
		}
		key := s.Namespace + "/" + s.Name
		for _, in := range s.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil || !ip.Is4() || !lan.Contains(ip) || nodeAddrs[ip] {
				continue
			}
			if k, ok := keys[ip]; !ok || key < k {
				keys[ip] = key
			}
			prev := allowed[ip]
			if prev == nil {
				prev = func(string) bool { return true }
			}
			if s.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
				allowed[ip] = func(n string) bool { return prev(n) && local[key][n] }
			} else {
				allowed[ip] = prev
			}
		}
	}
	out := map[netip.Addr]string{}
	for ip, ok := range allowed {
		var cs []string
		for _, n := range cands {
			if ok(n) {
				cs = append(cs, n)
			}
		}
		if Choose(ip, cs) == me {
			out[ip] = keys[ip]
		}
	}
	return out
}

// localEndpoints maps a Service key to the nodes holding a ready endpoint of it.
func localEndpoints(slices []*discovery.EndpointSlice) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, sl := range slices {
		svc := sl.Labels[discovery.LabelServiceName]
		if svc == "" {
			continue
		}
		key := sl.Namespace + "/" + svc
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			if out[key] == nil {
				out[key] = map[string]bool{}
			}
			out[key][*ep.NodeName] = true
		}
	}
	return out
}
