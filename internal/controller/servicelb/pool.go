package servicelb

import (
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"
)

// DefaultPool is the pool of a local cluster (DESIGN.md): loopback addresses, which
// the host publisher can listen on without configuring anything, since all of 127/8 is
// local on Linux.
const DefaultPool = "127.0.10.0/24"

// Pool is the set of addresses the controller hands out, as ordered, non-overlapping
// inclusive ranges. The zero Pool is empty.
type Pool struct {
	ranges []addrRange
	text   string
	host   Host // nil: addresses are not checked on a host (see OnHost)
	// nodes: the pool is NodesPool, Services get the nodes' own addresses.
	nodes bool
}

// addrRange is an inclusive range of addresses of one family.
type addrRange struct{ first, last netip.Addr }

// ParsePool reads a comma-separated list of addresses ("127.0.10.5"), CIDRs
// ("127.0.10.0/24") and inclusive ranges ("127.0.10.10-127.0.10.20"). A CIDR of IPv4
// with more than two addresses leaves out its network and broadcast addresses, as
// users expect from a subnet. The empty string is the empty pool (no addresses are
// assigned). Entries may not overlap. The word NodesPool ("nodes") is the pool of the
// nodes' own addresses (ComputeNodes).
func ParsePool(s string) (Pool, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Pool{}, nil
	}
	if s == NodesPool {
		return Pool{text: s, nodes: true}, nil
	}
	var rs []addrRange
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		r, err := parseRange(item)
		if err != nil {
			return Pool{}, fmt.Errorf("load-balancer pool %q: entry %q: %w", s, item, err)
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b addrRange) int { return a.first.Compare(b.first) })
	for i := 1; i < len(rs); i++ {
		if rs[i].first.BitLen() == rs[i-1].last.BitLen() && rs[i].first.Compare(rs[i-1].last) <= 0 {
			return Pool{}, fmt.Errorf("load-balancer pool %q: %s overlaps %s", s, rs[i], rs[i-1])
		}
	}
	return Pool{ranges: rs, text: s}, nil
}

// MustParsePool is ParsePool for constants; it panics on a malformed pool.
func MustParsePool(s string) Pool {
	p, err := ParsePool(s)
	if err != nil {
		panic(err)
	}
	return p
}

func parseRange(item string) (addrRange, error) {
	switch {
	case item == "":
		return addrRange{}, fmt.Errorf("empty entry (want an address, a CIDR or FIRST-LAST)")
	case strings.Contains(item, "/"):
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return addrRange{}, fmt.Errorf("not a CIDR: %w", err)
		}
		p = p.Masked()
		first, last := p.Addr(), lastAddr(p)
		if first.Is4() && p.Bits() < 31 {
			first, last = first.Next(), last.Prev()
		}
		return addrRange{first, last}, nil
	case strings.Contains(item, "-"):
		a, b, _ := strings.Cut(item, "-")
		first, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil {
			return addrRange{}, fmt.Errorf("range start: %w", err)
		}
		last, err := netip.ParseAddr(strings.TrimSpace(b))
		if err != nil {
			return addrRange{}, fmt.Errorf("range end: %w", err)
		}
		if first.BitLen() != last.BitLen() || first.Compare(last) > 0 {
			return addrRange{}, fmt.Errorf("range start must not be above its end, in one address family")
		}
		return addrRange{first.Unmap(), last.Unmap()}, nil
	default:
		a, err := netip.ParseAddr(item)
		if err != nil {
			return addrRange{}, fmt.Errorf("not an address: %w", err)
		}
		a = a.Unmap()
		return addrRange{a, a}, nil
	}
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		host := p.Bits() - i*8
		switch {
		case host <= 0:
			b[i] = 0xff
		case host < 8:
			b[i] |= 0xff >> host
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (r addrRange) String() string {
	if r.first == r.last {
		return r.first.String()
	}
	return r.first.String() + "-" + r.last.String()
}

func (r addrRange) contains(a netip.Addr) bool {
	return a.BitLen() == r.first.BitLen() && r.first.Compare(a) <= 0 && a.Compare(r.last) <= 0
}

// Empty reports whether the pool has no address; the pool of the nodes' addresses is
// not empty.
func (p Pool) Empty() bool { return len(p.ranges) == 0 && !p.nodes }

// Nodes reports whether the pool is NodesPool: Services get the nodes' addresses.
func (p Pool) Nodes() bool { return p.nodes }

// Contains reports whether a is in the pool (never for NodesPool, whose addresses are
// the nodes').
func (p Pool) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, r := range p.ranges {
		if r.contains(a) {
			return true
		}
	}
	return false
}

// Addrs yields the pool's addresses in ascending order (IPv4 first).
func (p Pool) Addrs() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		for _, r := range p.ranges {
			for a := r.first; a.IsValid() && a.Compare(r.last) <= 0; a = a.Next() {
				if !yield(a) {
					return
				}
			}
		}
	}
}

// String returns the pool as it was written.
func (p Pool) String() string {
	if p.Empty() {
		return "(empty)"
	}
	return p.text
}
