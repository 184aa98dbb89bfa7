package clusternet

import (
	"fmt"
	"net"
	"net/netip"
)

// Op is what one Step does.
type Op int

// The operations of a plan. Each names the Step fields it uses.
const (
	// OpCreateNamespace creates Namespace.
	OpCreateNamespace Op = iota
	// OpDeleteNamespace removes Namespace (idempotent).
	OpDeleteNamespace
	// OpSysctl writes Key=Value in Namespace; with IfExists, a key the kernel does not
	// have there is skipped.
	OpSysctl
	// OpLoUp sets lo up in Namespace.
	OpLoUp
	// OpBridge creates the bridge Link with the MAC address MAC, holding Addr, up.
	OpBridge
	// OpVeth creates the veth Link in Namespace with its peer Peer in PeerNamespace.
	OpVeth
	// OpAttach makes Link a port of Bridge with hairpin on, up.
	OpAttach
	// OpAddr adds Addr to Link (without its subnet route when NoPrefixRoute is set) and
	// sets Link up.
	OpAddr
	// OpRoute routes Dst via Via out of Link, or directly on Link when Via is the zero
	// Addr (replacing any route to Dst).
	OpRoute
	// OpDelRoute removes the route to Dst (idempotent).
	OpDelRoute
	// OpDelLink deletes Link (idempotent; a veth's peer goes with it).
	OpDelLink
	// OpMTU sets Link's MTU to MTU.
	OpMTU
	// OpBridgeIfMissing is OpBridge when no link named Link exists, else nothing.
	OpBridgeIfMissing
)

// Step is one change to one namespace. Plans are lists of Steps in the order they must be
// applied.
type Step struct {
	// Op is what the step does; it decides which of the other fields are used.
	Op Op
	// Namespace is the network namespace the step changes (or creates, or deletes).
	Namespace string
	// Link is the link the step creates or changes; Bridge the bridge OpAttach joins.
	Link, Bridge string
	// Peer and PeerNamespace are the far end of an OpVeth.
	Peer, PeerNamespace string
	// Addr is an address with its prefix length (OpBridge, OpAddr).
	Addr netip.Prefix
	// MAC is an OpBridge's MAC address.
	MAC net.HardwareAddr
	// NoPrefixRoute keeps the kernel from routing an OpAddr's whole subnet to Link.
	NoPrefixRoute bool
	// Dst and Via are a route's destination and gateway.
	Dst netip.Prefix
	Via netip.Addr
	// MTU is an OpMTU's MTU.
	MTU int
	// Key and Value are an OpSysctl's sysctl.
	Key, Value string
	// IfExists makes an OpSysctl skip a key the kernel does not have.
	IfExists bool
}

// String renders the step like the iproute2 command that would do the same, for logs,
// errors and tests.
func (s Step) String() string {
	n := s.Namespace
	switch s.Op {
	case OpCreateNamespace:
		return "ip netns add " + n
	case OpDeleteNamespace:
		return "ip netns delete " + n
	case OpSysctl:
		if s.IfExists {
			return fmt.Sprintf("%s: sysctl -w -e %s=%s", n, s.Key, s.Value)
		}
		return fmt.Sprintf("%s: sysctl -w %s=%s", n, s.Key, s.Value)
	case OpLoUp:
		return n + ": ip link set lo up"
	case OpBridge:
		return fmt.Sprintf("%s: ip link add %s address %s type bridge; ip addr add %s dev %s; ip link set %s up", n, s.Link, s.MAC, s.Addr, s.Link, s.Link)
	case OpVeth:
		return fmt.Sprintf("%s: ip link add %s type veth peer %s netns %s", n, s.Link, s.Peer, s.PeerNamespace)
	case OpAttach:
		return fmt.Sprintf("%s: ip link set %s master %s; bridge link set dev %s hairpin on; ip link set %s up", n, s.Link, s.Bridge, s.Link, s.Link)
	case OpAddr:
		flags := ""
		if s.NoPrefixRoute {
			flags = " noprefixroute"
		}
		return fmt.Sprintf("%s: ip addr add %s dev %s%s; ip link set %s up", n, s.Addr, s.Link, flags, s.Link)
	case OpRoute:
		if !s.Via.IsValid() {
			return fmt.Sprintf("%s: ip route replace %s dev %s scope link", n, routeDst(s.Dst), s.Link)
		}
		return fmt.Sprintf("%s: ip route replace %s via %s dev %s", n, routeDst(s.Dst), s.Via, s.Link)
	case OpDelRoute:
		return fmt.Sprintf("%s: ip route del %s", n, routeDst(s.Dst))
	case OpDelLink:
		return fmt.Sprintf("%s: ip link del %s", n, s.Link)
	case OpMTU:
		return fmt.Sprintf("%s: ip link set %s mtu %d", n, s.Link, s.MTU)
	case OpBridgeIfMissing:
		return fmt.Sprintf("%s: ip link show %s || { ip link add %s address %s type bridge; ip addr add %s dev %s; ip link set %s up; }", n, s.Link, s.Link, s.MAC, s.Addr, s.Link, s.Link)
	}
	return fmt.Sprintf("%s: unknown op %d", n, int(s.Op))
}

func routeDst(p netip.Prefix) string {
	switch {
	case p.Bits() == 0:
		return "default"
	case p.IsSingleIP():
		return p.Addr().String()
	}
	return p.String()
}

// bridgeMAC is the MAC address of the bridge holding addr: locally administered
// (0a:58, as ovn-kubernetes derives MACs from IPs) followed by the IPv4 address, so it is
// unique in the cluster and the same after every rebuild. A bridge's MAC must not change:
// the kernel would otherwise give the bridge its lowest port's MAC, which changes when
// that pod goes, and every pod routing through the bridge would keep sending to the old
// MAC until its ARP entry failed (seconds without a gateway).
func bridgeMAC(addr netip.Addr) net.HardwareAddr {
	a := addr.As4()
	return net.HardwareAddr{0x0a, 0x58, a[0], a[1], a[2], a[3]}
}

// sysctl is one sysctl of a plan; ifExists ones are skipped where the kernel lacks them.
type sysctl struct {
	key, value string
	ifExists   bool
}

// Sysctls every node namespace gets: it routes between its pods and the underlay;
// reverse-path filtering is off because with host-gw routing and Service DNAT a reply
// may legitimately arrive on another interface than the one the route back points to;
// it sends no ICMP redirects, because routing a packet between two of its pods back out
// of cbr0, the interface it came in by, is the design (README "Routed pods"), not a
// shortcut the pod should learn; and where the kernel has br_netfilter, its bridges do
// not run the IP hooks on frames (README "Routed pods" says why).
var nodeSysctls = []sysctl{
	{key: "net.ipv4.ip_forward", value: "1"},
	{key: "net.ipv4.conf.all.rp_filter", value: "0"},
	{key: "net.ipv4.conf.default.rp_filter", value: "0"},
	{key: "net.ipv4.conf.all.send_redirects", value: "0"},
	{key: "net.ipv4.conf.default.send_redirects", value: "0"},
	{key: "net.bridge.bridge-nf-call-iptables", value: "0", ifExists: true},
	{key: "net.bridge.bridge-nf-call-ip6tables", value: "0", ifExists: true},
	{key: "net.bridge.bridge-nf-call-arptables", value: "0", ifExists: true},
}

// Sysctls the underlay namespace gets: it only bridges between nodes (and holds the API
// server's cluster listener), so where the kernel has br_netfilter its bridge must not
// run every frame between two nodes through IP netfilter and conntrack, work no rule
// there asks for (a few per cent of an agent's CPU in bench/stream's profile).
var underlaySysctls = []sysctl{
	{key: "net.bridge.bridge-nf-call-iptables", value: "0", ifExists: true},
	{key: "net.bridge.bridge-nf-call-ip6tables", value: "0", ifExists: true},
	{key: "net.bridge.bridge-nf-call-arptables", value: "0", ifExists: true},
}

// Sysctls every pod namespace gets before its eth0 exists (so "default" applies to it):
// it accepts no ICMP redirect, which would let it send to another pod of its node
// directly over the bridge, past the node's IP layer.
var podSysctls = []sysctl{
	{key: "net.ipv4.conf.all.accept_redirects", value: "0"},
	{key: "net.ipv4.conf.default.accept_redirects", value: "0"},
}

// sysctlSteps are the steps that set sysctls in namespace ns.
func sysctlSteps(ns string, sysctls []sysctl) []Step {
	steps := make([]Step, len(sysctls))
	for i, s := range sysctls {
		steps[i] = Step{Op: OpSysctl, Namespace: ns, Key: s.key, Value: s.value, IfExists: s.ifExists}
	}
	return steps
}

// PlanUp returns the steps that build t from nothing: the underlay namespace and bridge,
// then every node.
func PlanUp(t Topology) ([]Step, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	u := t.Underlay()
	steps := append([]Step{{Op: OpCreateNamespace, Namespace: u}}, sysctlSteps(u, underlaySysctls)...)
	steps = append(steps,
		Step{Op: OpLoUp, Namespace: u},
		Step{Op: OpBridge, Namespace: u, Link: UnderlayBridge, Addr: netip.PrefixFrom(t.APIAddress, t.UnderlayCIDR.Bits()), MAC: bridgeMAC(t.APIAddress)},
	)
	for _, n := range t.Nodes {
		steps = append(steps, nodeSteps(t, n)...)
	}
	for _, n := range t.Nodes {
		steps = append(steps, underlayRoute(t, n))
	}
	return steps, nil
}

// nodeSteps builds node n of t: its namespace and sysctls (before any link exists, so
// "default" applies to all of them), its uplink to the underlay bridge, its pod bridge and
// a route to every other node's pod subnet via that node's underlay address (host-gw).
func nodeSteps(t Topology, n Node) []Step {
	ns := t.NodeNamespace(n.Name)
	steps := append([]Step{{Op: OpCreateNamespace, Namespace: ns}}, sysctlSteps(ns, nodeSysctls)...)
	steps = append(steps,
		Step{Op: OpLoUp, Namespace: ns},
		Step{Op: OpVeth, Namespace: t.Underlay(), Link: underlayLink(n.Name), Peer: NodeUplink, PeerNamespace: ns},
		Step{Op: OpAttach, Namespace: t.Underlay(), Link: underlayLink(n.Name), Bridge: UnderlayBridge},
		Step{Op: OpAddr, Namespace: ns, Link: NodeUplink, Addr: netip.PrefixFrom(n.Underlay, t.UnderlayCIDR.Bits())},
		Step{Op: OpBridge, Namespace: ns, Link: PodBridge, Addr: netip.PrefixFrom(n.Gateway(), n.PodCIDR.Bits()), MAC: bridgeMAC(n.Gateway())},
	)
	for _, o := range t.Nodes {
		if o.Name != n.Name {
			steps = append(steps, Step{Op: OpRoute, Namespace: ns, Dst: o.PodCIDR, Via: o.Underlay, Link: NodeUplink})
		}
	}
	return steps
}

// PlanPrepareNode returns the steps that make the existing namespace of node name, which
// tranche did not build (a machine's, holding its own uplink and address), a node: the
// node sysctls, lo up and the pod bridge when it is missing. Applying it again changes
// nothing; routes to other nodes are the overlay's (internal/overlay).
func PlanPrepareNode(t Topology, name string) ([]Step, error) {
	n, ok := t.Node(name)
	if !ok {
		return nil, fmt.Errorf("preparing node %q: it is not in the cluster", name)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	ns := t.NodeNamespace(name)
	return append(sysctlSteps(ns, nodeSysctls),
		Step{Op: OpLoUp, Namespace: ns},
		Step{Op: OpBridgeIfMissing, Namespace: ns, Link: PodBridge, Addr: netip.PrefixFrom(n.Gateway(), n.PodCIDR.Bits()), MAC: bridgeMAC(n.Gateway())},
	), nil
}

// underlayRoute lets the underlay namespace (the API server's cluster listener) answer
// pods of node n.
func underlayRoute(t Topology, n Node) Step {
	return Step{Op: OpRoute, Namespace: t.Underlay(), Dst: n.PodCIDR, Via: n.Underlay, Link: UnderlayBridge}
}

// PlanAddNode returns the steps that add node n to the running cluster t (which does not
// contain n yet): n itself, and a route to n's pod subnet on every other node and on the
// underlay.
func PlanAddNode(t Topology, n Node) ([]Step, error) {
	if _, ok := t.Node(n.Name); ok {
		return nil, fmt.Errorf("adding node %q: it is already in the cluster", n.Name)
	}
	t.Nodes = append(append([]Node(nil), t.Nodes...), n)
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("adding node %q: %w", n.Name, err)
	}
	steps := nodeSteps(t, n)
	for _, o := range t.Nodes {
		if o.Name != n.Name {
			steps = append(steps, Step{Op: OpRoute, Namespace: t.NodeNamespace(o.Name), Dst: n.PodCIDR, Via: n.Underlay, Link: NodeUplink})
		}
	}
	return append(steps, underlayRoute(t, n)), nil
}

// PlanRemoveNode returns the steps that remove node name from the running cluster t
// (which contains it): the other nodes' and the underlay's routes to its pod subnet, its
// veth to the underlay (deleted explicitly, so it is gone when the plan has been applied
// rather than whenever the kernel frees the namespace), and its namespace.
func PlanRemoveNode(t Topology, name string) ([]Step, error) {
	n, ok := t.Node(name)
	if !ok {
		return nil, fmt.Errorf("removing node %q: it is not in the cluster", name)
	}
	var steps []Step
	for _, o := range t.Nodes {
		if o.Name != name {
			steps = append(steps, Step{Op: OpDelRoute, Namespace: t.NodeNamespace(o.Name), Dst: n.PodCIDR})
		}
	}
	return append(steps,
		Step{Op: OpDelRoute, Namespace: t.Underlay(), Dst: n.PodCIDR},
		Step{Op: OpDelLink, Namespace: t.Underlay(), Link: underlayLink(name)},
		Step{Op: OpDeleteNamespace, Namespace: t.NodeNamespace(name)},
	), nil
}

// PlanAttachPod returns the steps that connect the existing namespace podNS to node's pod
// bridge with address ip, routed rather than bridged (README "Routed pods"): lo up, no
// ICMP redirects in the pod, a veth named PodVeth(podNS) on the node's bridge (hairpin
// on), eth0 with ip and the node's pod prefix length but without the subnet route, a
// link route to the node bridge's address and a default route via it. The pod thus
// sends every packet, also one to a pod of its own node, to the node, whose IP layer
// (netfilter included) routes it.
func PlanAttachPod(t Topology, node, podNS string, ip netip.Addr) ([]Step, error) {
	n, ok := t.Node(node)
	if !ok {
		return nil, fmt.Errorf("attaching pod namespace %q: node %q is not in the cluster", podNS, node)
	}
	if err := checkPodNamespace(t, podNS); err != nil {
		return nil, err
	}
	if !isHost(n.PodCIDR, ip) || ip == n.Gateway() {
		return nil, fmt.Errorf("attaching pod namespace %q: %s is not a pod address of node %q's %s", podNS, ip, node, n.PodCIDR)
	}
	ns := t.NodeNamespace(node)
	veth := PodVeth(podNS)
	steps := append([]Step{{Op: OpLoUp, Namespace: podNS}}, sysctlSteps(podNS, podSysctls)...)
	steps = append(steps, Step{Op: OpVeth, Namespace: ns, Link: veth, Peer: PodInterface, PeerNamespace: podNS})
	if t.PodMTU != 0 {
		steps = append(steps,
			Step{Op: OpMTU, Namespace: ns, Link: veth, MTU: t.PodMTU},
			Step{Op: OpMTU, Namespace: podNS, Link: PodInterface, MTU: t.PodMTU})
	}
	return append(steps,
		Step{Op: OpAttach, Namespace: ns, Link: veth, Bridge: PodBridge},
		Step{Op: OpAddr, Namespace: podNS, Link: PodInterface, Addr: netip.PrefixFrom(ip, n.PodCIDR.Bits()), NoPrefixRoute: true},
		Step{Op: OpRoute, Namespace: podNS, Dst: netip.PrefixFrom(n.Gateway(), 32), Link: PodInterface},
		Step{Op: OpRoute, Namespace: podNS, Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Via: n.Gateway(), Link: PodInterface},
	), nil
}

// PlanDetachPod returns the step that removes podNS's veth from node (idempotent); the
// pod's namespace itself is its owner's to delete.
func PlanDetachPod(t Topology, node, podNS string) ([]Step, error) {
	if _, ok := t.Node(node); !ok {
		return nil, fmt.Errorf("detaching pod namespace %q: node %q is not in the cluster", podNS, node)
	}
	if err := checkPodNamespace(t, podNS); err != nil {
		return nil, err
	}
	return []Step{{Op: OpDelLink, Namespace: t.NodeNamespace(node), Link: PodVeth(podNS)}}, nil
}

// checkPodNamespace refuses a pod namespace that is one of the cluster's own.
func checkPodNamespace(t Topology, podNS string) error {
	if podNS == "" || podNS == t.Underlay() {
		return fmt.Errorf("pod namespace %q is not usable for a pod", podNS)
	}
	for _, n := range t.Nodes {
		if podNS == t.NodeNamespace(n.Name) {
			return fmt.Errorf("pod namespace %q is node %q's namespace", podNS, n.Name)
		}
	}
	return nil
}
