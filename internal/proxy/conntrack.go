package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// UDP has no connection to close: conntrack keeps sending a client's datagrams to the
// endpoint chosen for its first one for as long as the client keeps talking, even after
// that endpoint is gone. So when a UDP endpoint stops being used the proxy deletes the
// entries translated to it, and when a UDP service gets its first endpoint it deletes
// entries to the service that were never translated.

// frontend is one address and port (or NodePort) through which a UDP service port is
// reached, with the endpoints this node sends it to. The conntrack cleanup compares
// the frontends of two syncs.
type frontend struct {
	// dst is the service address; invalid for a NodePort (any local address).
	dst       netip.Addr
	port      uint16
	endpoints []netip.AddrPort
}

// StaleFlow selects the UDP conntrack entries of one frontend that must go.
type StaleFlow struct {
	// Dst is the address the client sent to; the zero value matches any (a NodePort).
	Dst  netip.Addr
	Port uint16
	// Endpoint is the translation target that is no longer used; the zero value selects
	// entries that were not translated at all.
	Endpoint netip.AddrPort
}

// String renders the flow like conntrack's command-line filter, for logs.
func (f StaleFlow) String() string {
	dst := "*"
	if f.Dst.IsValid() {
		dst = f.Dst.String()
	}
	to := "untranslated"
	if f.Endpoint.IsValid() {
		to = "dnat " + f.Endpoint.String()
	}
	return fmt.Sprintf("udp %s:%d %s", dst, f.Port, to)
}

// Conntrack deletes conntrack entries of the node's network namespace.
type Conntrack interface {
	// DeleteUDP deletes the UDP entries matching any of flows and returns how many went.
	DeleteUDP(flows []StaleFlow) (int, error)
}

// staleFlows compares the UDP frontends of a service before and after a sync.
func staleFlows(old, cur []frontend) []StaleFlow {
	type key struct {
		dst  netip.Addr
		port uint16
	}
	now := make(map[key][]netip.AddrPort, len(cur))
	for _, f := range cur {
		now[key{f.dst, f.port}] = f.endpoints
	}
	was := make(map[key]bool, len(old))
	var out []StaleFlow
	for _, f := range old {
		k := key{f.dst, f.port}
		was[k] = len(f.endpoints) > 0
		for _, e := range f.endpoints {
			if !slices.Contains(now[k], e) {
				out = append(out, StaleFlow{Dst: f.dst, Port: f.port, Endpoint: e})
			}
		}
	}
	for _, f := range cur {
		if k := (key{f.dst, f.port}); len(f.endpoints) > 0 && !was[k] {
			out = append(out, StaleFlow{Dst: f.dst, Port: f.port})
		}
	}
	return out
}

// matches reports whether a conntrack entry is one of flows.
func matchesStale(flows []StaleFlow, fwdDst, replySrc netip.AddrPort) bool {
	for _, f := range flows {
		if fwdDst.Port() != f.Port || (f.Dst.IsValid() && fwdDst.Addr() != f.Dst) {
			continue
		}
		if f.Endpoint.IsValid() {
			if replySrc == f.Endpoint {
				return true
			}
		} else if replySrc == fwdDst {
			return true
		}
	}
	return false
}

// NetlinkConntrack deletes entries through netlink in the network namespace of the
// calling process (the node's, for `tranche agent`).
type NetlinkConntrack struct{}

var _ Conntrack = NetlinkConntrack{}

// DeleteUDP implements Conntrack.
func (NetlinkConntrack) DeleteUDP(flows []StaleFlow) (int, error) {
	if len(flows) == 0 {
		return 0, nil
	}
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, staleFilter(flows))
	if err != nil {
		return int(n), fmt.Errorf("deleting stale UDP conntrack entries: %w", err)
	}
	return int(n), nil
}

type staleFilter []StaleFlow

func (s staleFilter) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	if f.Forward.Protocol != unix.IPPROTO_UDP {
		return false
	}
	dst, ok1 := addrPort(f.Forward.DstIP, f.Forward.DstPort)
	src, ok2 := addrPort(f.Reverse.SrcIP, f.Reverse.SrcPort)
	return ok1 && ok2 && matchesStale(s, dst, src)
}

func addrPort(ip net.IP, port uint16) (netip.AddrPort, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), port), true
}
