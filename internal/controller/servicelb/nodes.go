package servicelb

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodesPool is the --loadbalancer-pool word for the nodes' own addresses, as k3s's
// ServiceLB gives them on machines where no address pool is routed: a LoadBalancer
// Service's status lists the address of every Ready node, and each node's proxy
// forwards what arrives there on the Service's ports to its endpoints (the address
// is the node's own, so its neighbours on the LAN reach it without any announcement).
const NodesPool = "nodes"

// LabelEnableLB is k3s's node label choosing the nodes whose addresses NodesPool hands
// out: when any node has it set to "true", only those nodes; else every node.
const LabelEnableLB = "svccontroller.k3s.cattle.io/enablelb"

// ComputeNodes is Compute for NodesPool: every eligible Service gets the addresses of
// nodes (ExternalIP when a node has one, else InternalIP; IPv4; Ready nodes only, and
// only those labelled LabelEnableLB=true when any is), sorted. Two Services cannot hold the same protocol and port on the nodes (k3s's
// ServiceLB pods bind them as host ports): the Service that held its addresses in
// prev, then the older one (then the lower namespace/name), keeps them and the other
// stays pending with a reason naming the holder. A Service with spec.loadBalancerIP
// stays pending: the nodes' addresses are not chosen.
func ComputeNodes(svcs []*v1.Service, nodes []*v1.Node, prev Plan) Plan {
	addrs := nodeAddrs(nodes)
	type cand struct {
		svc    *v1.Service
		key    types.NamespacedName
		ports  []Port
		holder bool
	}
	var cands []cand
	for _, svc := range svcs {
		if !Eligible(svc) {
			continue
		}
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		p, held := prev[key]
		cands = append(cands, cand{svc: svc, key: key, ports: servicePorts(svc), holder: held && len(p.Nodes) > 0})
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.holder != b.holder {
			if a.holder {
				return -1
			}
			return 1
		}
		return cmp.Or(a.svc.CreationTimestamp.Time.Compare(b.svc.CreationTimestamp.Time),
			cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})
	plan := Plan{}
	used := map[Port]types.NamespacedName{}
	for _, c := range cands {
		pending := func(reason string) { plan[c.key] = Assignment{Ports: c.ports, Pending: reason} }
		if s := strings.TrimSpace(c.svc.Spec.LoadBalancerIP); s != "" {
			pending(fmt.Sprintf("spec.loadBalancerIP %s cannot be chosen: the load-balancer addresses are the nodes' own (--loadbalancer-pool %s)", s, NodesPool))
			continue
		}
		if len(addrs) == 0 {
			pending("no Ready node has an IPv4 address to offer (--loadbalancer-pool " + NodesPool + ")")
			continue
		}
		if i := slices.IndexFunc(c.ports, func(p Port) bool { _, ok := used[p]; return ok }); i >= 0 {
			pending(fmt.Sprintf("port %s of the nodes' addresses is already used by Service %s", c.ports[i], used[c.ports[i]]))
			continue
		}
		for _, p := range c.ports {
			used[p] = c.key
		}
		plan[c.key] = Assignment{IP: addrs[0], Nodes: addrs, Ports: c.ports}
	}
	return plan
}

// nodeAddrs returns the address each Ready node offers (of the LabelEnableLB ones when
// any node has it), sorted and distinct.
func nodeAddrs(nodes []*v1.Node) []netip.Addr {
	labelled := slices.ContainsFunc(nodes, func(n *v1.Node) bool { return n != nil && n.Labels[LabelEnableLB] == "true" })
	var out []netip.Addr
	for _, n := range nodes {
		if n == nil || n.DeletionTimestamp != nil || !nodeReady(n) || (labelled && n.Labels[LabelEnableLB] != "true") {
			continue
		}
		var internal, external netip.Addr
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || !ip.Unmap().Is4() {
				continue
			}
			switch {
			case a.Type == v1.NodeExternalIP && !external.IsValid():
				external = ip.Unmap()
			case a.Type == v1.NodeInternalIP && !internal.IsValid():
				internal = ip.Unmap()
			}
		}
		if external.IsValid() {
			out = append(out, external)
		} else if internal.IsValid() {
			out = append(out, internal)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
