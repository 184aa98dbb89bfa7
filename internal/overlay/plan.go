// Package overlay routes the other nodes' pod subnets from a node's network namespace,
// as flannel's backends do: a VXLAN overlay (a vxlan device, a route, an ARP entry and an
// FDB entry per remote node) or host-gw (a plain route via the remote node's address when
// the nodes share a link). What every node needs is published in its Node's annotations
// and read back through a Node informer; the kernel state is computed as a pure function
// of the Node list (Desired), compared with what is there (Diff) and written in one step.
package overlay

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// The backends an agent can run with (its --backend flag).
const (
	// BackendVXLAN encapsulates pod traffic between nodes in VXLAN (VNI 1, UDP 8472).
	BackendVXLAN = "vxlan"
	// BackendHostGW routes each remote pod subnet via the remote node's address; the
	// nodes must share a link.
	BackendHostGW = "host-gw"
	// BackendNone leaves routing between nodes to someone else (`tranche up`, whose
	// cluster network routes every node already).
	BackendNone = "none"
)

// Backends lists the valid --backend values.
func Backends() []string { return []string{BackendVXLAN, BackendHostGW, BackendNone} }

// Node annotations: flannel's names and shapes, so that tooling reading them works.
const (
	// AnnotationBackendType names the node's backend ("vxlan" or "host-gw").
	AnnotationBackendType = "flannel.alpha.coreos.com/backend-type"
	// AnnotationBackendData is the backend's data: {"VNI":1,"VtepMAC":"..."} for vxlan,
	// "null" for host-gw.
	AnnotationBackendData = "flannel.alpha.coreos.com/backend-data"
	// AnnotationPublicIP is the node's underlay address: the VXLAN tunnel endpoint, or the
	// host-gw gateway.
	AnnotationPublicIP = "flannel.alpha.coreos.com/public-ip"
)

// VXLAN parameters (flannel's defaults).
const (
	// VXLANDevice is the vxlan link's name (flannel's "flannel.<VNI>").
	VXLANDevice = "flannel.1"
	// VNI is the VXLAN network identifier.
	VNI = 1
	// VXLANPort is the UDP port of the tunnel (the Linux default, flannel's).
	VXLANPort = 8472
	// VXLANOverhead is what encapsulation takes from the uplink's MTU: outer IPv4 (20),
	// UDP (8), VXLAN (8) and inner Ethernet (14) headers.
	VXLANOverhead = 50
)

// RouteProtocol marks the routes this package owns (rtm_protocol), so that a sync
// removes only those and never a route someone else added.
const RouteProtocol = 84

// backendData is AnnotationBackendData for vxlan, as flannel writes it.
type backendData struct {
	VNI     int    `json:"VNI"`
	VtepMAC string `json:"VtepMAC"`
}

// Local is this node as the overlay sees it.
type Local struct {
	// Name is the node's name.
	Name string
	// PodCIDR is the node's own pod subnet (never routed to a peer).
	PodCIDR netip.Prefix
	// Uplink is the link holding PublicIP; UplinkPrefix is PublicIP with the link's
	// prefix length (host-gw routes only peers inside it); UplinkMTU is its MTU.
	Uplink       string
	UplinkPrefix netip.Prefix
	UplinkMTU    int
	// VtepMAC is the vxlan device's MAC (vxlan only).
	VtepMAC net.HardwareAddr
}

// Peer is another node, as read from its Node object.
type Peer struct {
	Name     string
	Backend  string
	PodCIDR  netip.Prefix
	PublicIP netip.Addr
	VtepMAC  net.HardwareAddr
}

// Annotations returns the annotations a node running backend publishes.
func Annotations(backend string, publicIP netip.Addr, vtepMAC net.HardwareAddr) map[string]string {
	data := "null"
	if backend == BackendVXLAN {
		b, _ := json.Marshal(backendData{VNI: VNI, VtepMAC: vtepMAC.String()})
		data = string(b)
	}
	return map[string]string{
		AnnotationBackendType: backend,
		AnnotationBackendData: data,
		AnnotationPublicIP:    publicIP.String(),
	}
}

// PeerFromNode reads a peer from a Node: its spec.podCIDR, its public IP (the annotation,
// else its InternalIP) and, for vxlan, its VTEP MAC. It fails, saying what is missing,
// when the node cannot be routed yet (it has not published its annotations, say).
func PeerFromNode(n *v1.Node) (Peer, error) {
	p := Peer{Name: n.Name, Backend: n.Annotations[AnnotationBackendType]}
	var err error
	if p.PodCIDR, err = netip.ParsePrefix(n.Spec.PodCIDR); err != nil || !p.PodCIDR.Addr().Is4() {
		return p, fmt.Errorf("node %q: spec.podCIDR %q is not an IPv4 CIDR", n.Name, n.Spec.PodCIDR)
	}
	p.PodCIDR = p.PodCIDR.Masked()
	ip := n.Annotations[AnnotationPublicIP]
	if ip == "" {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				ip = a.Address
				break
			}
		}
	}
	if p.PublicIP, err = netip.ParseAddr(ip); err != nil || !p.PublicIP.Is4() {
		return p, fmt.Errorf("node %q: no IPv4 public address (annotation %s or an InternalIP)", n.Name, AnnotationPublicIP)
	}
	if p.Backend == BackendVXLAN {
		var d backendData
		if err := json.Unmarshal([]byte(n.Annotations[AnnotationBackendData]), &d); err != nil {
			return p, fmt.Errorf("node %q: annotation %s: %w", n.Name, AnnotationBackendData, err)
		}
		if p.VtepMAC, err = net.ParseMAC(d.VtepMAC); err != nil || d.VNI != VNI {
			return p, fmt.Errorf("node %q: annotation %s must hold VNI %d and a VtepMAC, not %q", n.Name, AnnotationBackendData, VNI, n.Annotations[AnnotationBackendData])
		}
	}
	return p, nil
}

// Route is one route in the node's main table.
type Route struct {
	Dst    netip.Prefix
	Gw     netip.Addr
	Dev    string
	OnLink bool
}

// Neigh is a permanent ARP entry on Dev.
type Neigh struct {
	IP  netip.Addr
	MAC string
	Dev string
}

// FDB is a forwarding entry of the vxlan device: frames to MAC go to the tunnel
// endpoint Dst.
type FDB struct {
	MAC string
	Dst netip.Addr
	Dev string
}

// State is the kernel state the overlay owns in a node's namespace.
type State struct {
	Routes []Route
	Neighs []Neigh
	FDB    []FDB
}

// Desired is the state a node running backend should have for peers: per vxlan peer a
// route to its pod subnet via its subnet's network address on the vxlan device (onlink),
// an ARP entry for that address with its VTEP MAC, and an FDB entry sending that MAC to
// its public IP (flannel's vxlan backend); per host-gw peer on the uplink's subnet a
// route via its public IP. Peers of another backend, this node itself, and peers whose
// subnet overlaps this node's are skipped, as are host-gw peers off the link; skipped
// lists them with the reason.
func Desired(backend string, self Local, peers []Peer) (s State, skipped []string) {
	for _, p := range peers {
		switch {
		case p.Name == self.Name:
			continue
		case p.Backend != backend:
			skipped = append(skipped, fmt.Sprintf("node %q runs backend %q, not %q", p.Name, p.Backend, backend))
			continue
		case self.PodCIDR.IsValid() && p.PodCIDR.Overlaps(self.PodCIDR):
			skipped = append(skipped, fmt.Sprintf("node %q: pod CIDR %s overlaps this node's %s", p.Name, p.PodCIDR, self.PodCIDR))
			continue
		}
		switch backend {
		case BackendVXLAN:
			gw := p.PodCIDR.Addr()
			mac := p.VtepMAC.String()
			s.Routes = append(s.Routes, Route{Dst: p.PodCIDR, Gw: gw, Dev: VXLANDevice, OnLink: true})
			s.Neighs = append(s.Neighs, Neigh{IP: gw, MAC: mac, Dev: VXLANDevice})
			s.FDB = append(s.FDB, FDB{MAC: mac, Dst: p.PublicIP, Dev: VXLANDevice})
		case BackendHostGW:
			if !self.UplinkPrefix.Masked().Contains(p.PublicIP) {
				skipped = append(skipped, fmt.Sprintf("node %q: %s is not on this node's link %s (host-gw needs one link; use vxlan)", p.Name, p.PublicIP, self.UplinkPrefix.Masked()))
				continue
			}
			s.Routes = append(s.Routes, Route{Dst: p.PodCIDR, Gw: p.PublicIP, Dev: self.Uplink})
		}
	}
	s.sort()
	return s, skipped
}

func (s *State) sort() {
	sort.Slice(s.Routes, func(i, j int) bool { return s.Routes[i].Dst.String() < s.Routes[j].Dst.String() })
	sort.Slice(s.Neighs, func(i, j int) bool { return s.Neighs[i].IP.Less(s.Neighs[j].IP) })
	sort.Slice(s.FDB, func(i, j int) bool { return s.FDB[i].MAC < s.FDB[j].MAC })
}

// Changes are what a sync writes: entries to add (or replace) and entries to delete.
type Changes struct {
	AddRoutes, DelRoutes []Route
	AddNeighs, DelNeighs []Neigh
	AddFDB, DelFDB       []FDB
}

// Empty reports whether there is nothing to write.
func (c Changes) Empty() bool {
	return len(c.AddRoutes)+len(c.DelRoutes)+len(c.AddNeighs)+len(c.DelNeighs)+len(c.AddFDB)+len(c.DelFDB) == 0
}

// Diff returns what turns current into desired. Routes are keyed by destination, ARP
// entries by address, FDB entries by MAC and endpoint; an entry that differs in any field
// is replaced. Deletions come first in Apply, so a replaced FDB entry never has two
// endpoints.
func Diff(current, desired State) Changes {
	var c Changes
	c.AddRoutes, c.DelRoutes = diff(current.Routes, desired.Routes, func(r Route) netip.Prefix { return r.Dst })
	c.AddNeighs, c.DelNeighs = diff(current.Neighs, desired.Neighs, func(n Neigh) netip.Addr { return n.IP })
	c.AddFDB, c.DelFDB = diff(current.FDB, desired.FDB, func(f FDB) FDB { return f })
	return c
}

func diff[T comparable, K comparable](current, desired []T, key func(T) K) (add, del []T) {
	want := map[K]T{}
	for _, d := range desired {
		want[key(d)] = d
	}
	have := map[K]T{}
	for _, c := range current {
		have[key(c)] = c
		if d, ok := want[key(c)]; !ok || d != c {
			if !ok {
				del = append(del, c)
			}
		}
	}
	for _, d := range desired {
		if c, ok := have[key(d)]; !ok || c != d {
			add = append(add, d)
		}
	}
	return add, slices.Clip(del)
}
