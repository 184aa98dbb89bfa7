package servicelb

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// Host is the machine that publishes the pool's addresses: the host publisher of
// `tranche up`. Other programs on it may hold ports of those addresses, another local
// cluster drawing from the same default pool first of all; an address whose port is
// held there is no use to a Service, however free it is in this cluster, since the
// publisher cannot listen on it and clients would reach the other program.
type Host interface {
	// Taken reports whether something other than this cluster's publisher holds the
	// port of addr for protocol (TCP or UDP) on the host.
	Taken(protocol v1.Protocol, addr netip.AddrPort) bool
	// Changed receives a value when an assigned address turned out to be taken on
	// the host (the publisher could not listen on it), so the plan is computed again.
	Changed() <-chan struct{}
}

// OnHost returns the pool whose addresses are also checked against h: Compute gives
// no Service a port another program holds on the host, and moves a Service whose
// address was taken there before the publisher could listen on it. The pool of a
// cluster whose addresses are not published on this machine has no Host.
func (p Pool) OnHost(h Host) Pool {
	p.host = h
	return p
}

// hostTaken says which port of ports is held by another program on ip's host, or
// returns "" when none is (or the pool has no Host). Only TCP and UDP ports are
// published, so only they are checked.
func (p Pool) hostTaken(ip netip.Addr, ports []Port) string {
	if p.host == nil {
		return ""
	}
	for _, port := range ports {
		if port.Protocol != v1.ProtocolTCP && port.Protocol != v1.ProtocolUDP {
			continue
		}
		if p.host.Taken(port.Protocol, netip.AddrPortFrom(ip, uint16(port.Port))) {
			return "port " + port.String() + " of " + ip.String() + " is held by another program on the host"
		}
	}
	return ""
}

// snapshotHost answers each question about the host once: one Compute sees one state of
// the host, even when another program takes a port in the middle of it. (Otherwise a
// Service could be found free on its address when the candidates are made and taken
// there when its collisions are checked, and be left pending for one plan instead of
// keeping its address until the next plan moves it.)
type snapshotHost struct {
	Host
	seen map[snapshotKey]bool
}

type snapshotKey struct {
	protocol v1.Protocol
	addr     netip.AddrPort
}

func (h *snapshotHost) Taken(protocol v1.Protocol, addr netip.AddrPort) bool {
	k := snapshotKey{protocol, addr}
	taken, ok := h.seen[k]
	if !ok {
		taken = h.Host.Taken(protocol, addr)
		h.seen[k] = taken
	}
	return taken
}

// snapshot returns the pool with its Host, if any, answering as snapshotHost does.
func (p Pool) snapshot() Pool {
	if p.host != nil {
		p.host = &snapshotHost{Host: p.host, seen: map[snapshotKey]bool{}}
	}
	return p
}
