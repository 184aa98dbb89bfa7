package clusternet

import (
	"fmt"
	"net/netip"
	"slices"
)

// PodIPs hands out the pod addresses of one node's pod subnet: every host address except
// the first (the node bridge's). It is plain data without I/O; a caller that must survive
// restarts persists Allocated and calls Reserve for each on start. Not safe for
// concurrent use.
type PodIPs struct {
	first, last netip.Addr // the range handed out, inclusive
	used        map[netip.Addr]bool
	// next is where the search for a free address starts. Allocation goes round the
	// range rather than always taking the lowest free address, so a just-released
	// address is not given to the next pod while stale endpoints, conntrack entries or
	// DNS answers may still point at it.
	next netip.Addr
}

// NewPodIPs returns an allocator for podCIDR (an IPv4 subnet of at most /30) handing out
// .2 upward (for a /24: .2 to .254).
func NewPodIPs(podCIDR netip.Prefix) (*PodIPs, error) {
	p := podCIDR.Masked()
	if !podCIDR.IsValid() || !p.Addr().Is4() || p.Bits() > 30 || p != podCIDR {
		return nil, fmt.Errorf("pod CIDR %s must be an IPv4 subnet of at most /30", podCIDR)
	}
	first := p.Addr().Next().Next()
	last, _ := nthHost(p, (1<<(32-p.Bits()))-2)
	return &PodIPs{first: first, last: last, used: map[netip.Addr]bool{}, next: first}, nil
}

// Allocate returns a free address and marks it used, or fails when none is left.
func (a *PodIPs) Allocate() (netip.Addr, error) {
	ip := a.next
	for {
		if !a.used[ip] {
			a.used[ip] = true
			a.next = a.after(ip)
			return ip, nil
		}
		ip = a.after(ip)
		if ip == a.next {
			return netip.Addr{}, fmt.Errorf("no free pod address in %s..%s", a.first, a.last)
		}
	}
}

func (a *PodIPs) after(ip netip.Addr) netip.Addr {
	if ip == a.last {
		return a.first
	}
	return ip.Next()
}

// Reserve marks ip used, as when restoring persisted allocations; it fails when ip is
// outside the range or already used.
func (a *PodIPs) Reserve(ip netip.Addr) error {
	if !a.inRange(ip) {
		return fmt.Errorf("pod address %s is outside %s..%s", ip, a.first, a.last)
	}
	if a.used[ip] {
		return fmt.Errorf("pod address %s is already allocated", ip)
	}
	a.used[ip] = true
	return nil
}

// Release frees ip; releasing a free or foreign address does nothing.
func (a *PodIPs) Release(ip netip.Addr) {
	delete(a.used, ip)
}

// Allocated returns the addresses in use, sorted.
func (a *PodIPs) Allocated() []netip.Addr {
	out := make([]netip.Addr, 0, len(a.used))
	for ip := range a.used {
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func (a *PodIPs) inRange(ip netip.Addr) bool {
	return ip.Is4() && a.first.Compare(ip) <= 0 && ip.Compare(a.last) <= 0
}
