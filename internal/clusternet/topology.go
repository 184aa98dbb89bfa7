// Package clusternet builds the cluster network of a local tranche cluster out of network
// namespaces (see README.md): an underlay namespace whose bridge joins the nodes, one
// namespace per node with a bridge for its pods and host-gw routes to the other nodes'
// pod subnets, and a veth per pod. Every change is computed first as a plan (a list of
// Steps, pure and tested without root) and then applied in one step.
package clusternet

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Default addresses (DESIGN.md, "Default addresses").
var (
	// DefaultUnderlayCIDR is the subnet of the underlay bridge joining the nodes.
	DefaultUnderlayCIDR = netip.MustParsePrefix("10.240.0.0/24")
	// DefaultAPIAddress is the underlay bridge's own address, where the API server's
	// cluster listener binds.
	DefaultAPIAddress = netip.MustParseAddr("10.240.0.1")
	// DefaultClusterCIDR is the pod network; node i gets its i-th /24.
	DefaultClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
)

// Names of links inside tranche's namespaces. Names containing '_' can never equal a
// link named after a node, because node names are DNS subdomains.
const (
	// UnderlayBridge is the bridge in the underlay namespace.
	UnderlayBridge = "br_underlay"
	// PodBridge is the bridge in a node namespace that the pods' veths are ports of.
	PodBridge = "cbr0"
	// NodeUplink is the node's end of its veth to the underlay bridge.
	NodeUplink = "eth0"
	// PodInterface is the pod's end of its veth to the node bridge.
	PodInterface = "eth0"
)

// nodeUnderlayOffset is the host number of node 0 in the underlay subnet; the addresses
// below it are left to the API server (.1) and future infrastructure.
const nodeUnderlayOffset = 10

// podSubnetBits is the prefix length of the pod subnet each node gets from ClusterCIDR.
const podSubnetBits = 24

// Topology is the whole cluster network: which namespaces exist and which addresses they
// hold. It is plain data; the functions of this package turn it into plans.
type Topology struct {
	// Prefix starts the name of every namespace of this cluster ("tr-" in production, a
	// unique one in tests); Teardown removes everything carrying it.
	Prefix string
	// UnderlayCIDR is the subnet joining the nodes (10.240.0.0/24).
	UnderlayCIDR netip.Prefix
	// APIAddress is the underlay bridge's address inside UnderlayCIDR (10.240.0.1).
	APIAddress netip.Addr
	// ClusterCIDR contains every node's PodCIDR (10.244.0.0/16).
	ClusterCIDR netip.Prefix
	// Nodes are the cluster's nodes, in no particular order.
	Nodes []Node
	// PodMTU, when not 0, is the MTU of pods' veths (both ends): an overlay's agent sets
	// it to its uplink's MTU less the encapsulation (internal/overlay). `tranche up`
	// leaves it 0: its nodes share one link and route without encapsulation.
	PodMTU int `json:",omitempty"`
}

// Node is one node of a Topology.
type Node struct {
	// Name is the Kubernetes node name; its namespace is Topology.Prefix + Name.
	Name string
	// Underlay is the node's address on the underlay (held by its eth0).
	Underlay netip.Addr
	// PodCIDR is the node's pod subnet; its first address is the node bridge's, pods get
	// the others.
	PodCIDR netip.Prefix
}

// NewTopology returns a topology with the default addresses whose node i (in the order
// given) has the underlay address NodeUnderlay(i) and the pod subnet NodePodCIDR(i).
func NewTopology(prefix string, nodes ...string) (Topology, error) {
	t := Topology{
		Prefix:       prefix,
		UnderlayCIDR: DefaultUnderlayCIDR,
		APIAddress:   DefaultAPIAddress,
		ClusterCIDR:  DefaultClusterCIDR,
	}
	for i, name := range nodes {
		n, err := t.nodeAt(i, name)
		if err != nil {
			return Topology{}, err
		}
		t.Nodes = append(t.Nodes, n)
	}
	return t, t.Validate()
}

// NodeUnderlay is the conventional underlay address of node i: host number 10+i in
// UnderlayCIDR (10.240.0.10, .11, ...), leaving .1-.9 to the API server and other
// infrastructure. It fails when the subnet has no such host address.
func (t Topology) NodeUnderlay(i int) (netip.Addr, error) {
	a, ok := nthHost(t.UnderlayCIDR, nodeUnderlayOffset+i)
	if !ok || i < 0 {
		return netip.Addr{}, fmt.Errorf("underlay %s has no address for node %d", t.UnderlayCIDR, i)
	}
	return a, nil
}

// NodePodCIDR is the conventional pod subnet of node i: the i-th /24 of ClusterCIDR
// (10.244.0.0/24, 10.244.1.0/24, ...).
func (t Topology) NodePodCIDR(i int) (netip.Prefix, error) {
	base := t.ClusterCIDR.Masked()
	if !base.Addr().Is4() || base.Bits() > podSubnetBits || i < 0 || i >= 1<<(podSubnetBits-base.Bits()) {
		return netip.Prefix{}, fmt.Errorf("cluster CIDR %s has no /%d for node %d", t.ClusterCIDR, podSubnetBits, i)
	}
	b := base.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i) << (32 - podSubnetBits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), podSubnetBits), nil
}

// NextNode returns a node named name with the conventional addresses of the lowest index
// whose underlay address and pod subnet are both unused, for adding a node to a running
// cluster. It does not change t.
func (t Topology) NextNode(name string) (Node, error) {
	for i := 0; ; i++ {
		n, err := t.nodeAt(i, name)
		if err != nil {
			return Node{}, fmt.Errorf("no free addresses for node %q: %w", name, err)
		}
		free := true
		for _, o := range t.Nodes {
			free = free && o.Underlay != n.Underlay && !o.PodCIDR.Overlaps(n.PodCIDR)
		}
		if free {
			return n, nil
		}
	}
}

func (t Topology) nodeAt(i int, name string) (Node, error) {
	u, err := t.NodeUnderlay(i)
	if err != nil {
		return Node{}, err
	}
	p, err := t.NodePodCIDR(i)
	if err != nil {
		return Node{}, err
	}
	return Node{Name: name, Underlay: u, PodCIDR: p}, nil
}

// nthHost returns the address n above the network address of p when it is a host
// address of p (neither the network nor the broadcast address).
func nthHost(p netip.Prefix, n int) (netip.Addr, bool) {
	p = p.Masked()
	if !p.Addr().Is4() || n <= 0 || p.Bits() > 30 || n >= 1<<(32-p.Bits())-1 {
		return netip.Addr{}, false
	}
	a := p.Addr()
	for range n {
		a = a.Next()
	}
	return a, true
}

// isHost reports whether a is a host address of the IPv4 subnet p.
func isHost(p netip.Prefix, a netip.Addr) bool {
	if !p.Contains(a) || p.Bits() > 30 {
		return false
	}
	last := p.Masked().Addr()
	for range (1 << (32 - p.Bits())) - 1 {
		last = last.Next()
	}
	return a != p.Masked().Addr() && a != last
}

// Underlay returns the name of the underlay namespace.
func (t Topology) Underlay() string {
	return t.Prefix + "net"
}

// NodeNamespace returns the name of a node's namespace.
func (t Topology) NodeNamespace(node string) string {
	return t.Prefix + node
}

// Node returns the node with that name.
func (t Topology) Node(name string) (Node, bool) {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Gateway is the first address of a node's pod subnet, held by its PodBridge: the pods'
// default gateway.
func (n Node) Gateway() netip.Addr {
	return n.PodCIDR.Masked().Addr().Next()
}

// underlayLink names a node's veth end in the underlay namespace: the node name when it
// fits in a link name and is not "lo", otherwise "n_" and a hash of it.
func underlayLink(node string) string {
	if len(node) <= 15 && node != "lo" {
		return node
	}
	return "n_" + hash8(node)
}

// PodVeth names a pod's veth end in its node's namespace after the pod's namespace, as
// the CNI bridge plugin does ("veth" and 8 hex digits).
func PodVeth(podNS string) string {
	return "veth" + hash8(podNS)
}

func hash8(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// Validate checks that t can be built: a usable prefix, IPv4 subnets, the API address
// and every node address being distinct host addresses of the underlay, node names that
// are DNS subdomains and unique, and pod subnets inside ClusterCIDR that do not overlap.
func (t Topology) Validate() error {
	var errs []error
	if t.Prefix == "" || strings.ContainsAny(t.Prefix, "/\x00") {
		errs = append(errs, fmt.Errorf("prefix %q must be non-empty and contain no '/'", t.Prefix))
	}
	if !t.UnderlayCIDR.IsValid() || !t.UnderlayCIDR.Addr().Is4() || t.UnderlayCIDR.Bits() > 30 {
		errs = append(errs, fmt.Errorf("underlay CIDR %s must be an IPv4 subnet of at least 4 addresses", t.UnderlayCIDR))
	}
	if !t.ClusterCIDR.IsValid() || !t.ClusterCIDR.Addr().Is4() {
		errs = append(errs, fmt.Errorf("cluster CIDR %s must be an IPv4 subnet", t.ClusterCIDR))
	}
	if !isHost(t.UnderlayCIDR, t.APIAddress) {
		errs = append(errs, fmt.Errorf("API address %s must be a host address of the underlay %s", t.APIAddress, t.UnderlayCIDR))
	}
	if t.PodMTU != 0 && (t.PodMTU < 576 || t.PodMTU > 65535) {
		errs = append(errs, fmt.Errorf("pod MTU %d must be 0 (the default) or from 576 to 65535", t.PodMTU))
	}
	names := map[string]bool{}
	links := map[string]string{}
	underlay := map[netip.Addr]string{t.APIAddress: "the API address"}
	for i, n := range t.Nodes {
		for _, msg := range validation.IsDNS1123Subdomain(n.Name) {
			errs = append(errs, fmt.Errorf("node %d name %q: %s", i, n.Name, msg))
		}
		if n.Name == "net" {
			errs = append(errs, fmt.Errorf("node name %q is reserved for the underlay namespace", n.Name))
		}
		if names[n.Name] {
			errs = append(errs, fmt.Errorf("node %q appears twice", n.Name))
		}
		names[n.Name] = true
		if other, ok := links[underlayLink(n.Name)]; ok {
			errs = append(errs, fmt.Errorf("nodes %q and %q have the same underlay link name", other, n.Name))
		}
		links[underlayLink(n.Name)] = n.Name
		if !isHost(t.UnderlayCIDR, n.Underlay) {
			errs = append(errs, fmt.Errorf("node %q: underlay address %s must be a host address of %s", n.Name, n.Underlay, t.UnderlayCIDR))
		} else if other, ok := underlay[n.Underlay]; ok {
			errs = append(errs, fmt.Errorf("node %q: underlay address %s is already %s", n.Name, n.Underlay, other))
		}
		underlay[n.Underlay] = fmt.Sprintf("node %q's", n.Name)
		if !n.PodCIDR.IsValid() || n.PodCIDR != n.PodCIDR.Masked() || n.PodCIDR.Bits() > 30 ||
			!t.ClusterCIDR.Contains(n.PodCIDR.Addr()) || n.PodCIDR.Bits() < t.ClusterCIDR.Bits() {
			errs = append(errs, fmt.Errorf("node %q: pod CIDR %s must be a subnet (at most /30) of the cluster CIDR %s", n.Name, n.PodCIDR, t.ClusterCIDR))
		}
		for _, o := range t.Nodes[:i] {
			if n.PodCIDR.IsValid() && o.PodCIDR.IsValid() && n.PodCIDR.Overlaps(o.PodCIDR) {
				errs = append(errs, fmt.Errorf("node %q: pod CIDR %s overlaps node %q's %s", n.Name, n.PodCIDR, o.Name, o.PodCIDR))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid cluster topology %q: %w", t.Prefix, err)
	}
	return nil
}
