package netpol

import (
	"fmt"
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
)

// ipBlockPrefixes returns an ipBlock's cidr minus its except entries as disjoint
// prefixes. Only IPv4 is enforced (the cluster network is IPv4); an IPv6 block matches
// nothing here.
func ipBlockPrefixes(b *networkingv1.IPBlock) ([]netip.Prefix, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil, fmt.Errorf("cidr: Invalid value: %q: must be a valid CIDR", b.CIDR)
	}
	if !cidr.Addr().Is4() {
		return nil, nil
	}
	out := []netip.Prefix{cidr.Masked()}
	for i, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("except[%d]: Invalid value: %q: must be a valid CIDR", i, e)
		}
		var next []netip.Prefix
		for _, p := range out {
			next = append(next, subtract(p, ex.Masked())...)
		}
		out = next
	}
	return out, nil
}

// subtract returns p minus x as disjoint prefixes.
func subtract(p, x netip.Prefix) []netip.Prefix {
	if !p.Overlaps(x) {
		return []netip.Prefix{p}
	}
	if x.Bits() <= p.Bits() { // x covers p
		return nil
	}
	lo, hi := halves(p)
	return append(subtract(lo, x), subtract(hi, x)...)
}

// halves splits p into its two prefixes one bit longer.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits)
	a := p.Addr().As4()
	idx := (bits - 1) / 8
	a[idx] |= 0x80 >> ((bits - 1) % 8)
	return lo, netip.PrefixFrom(netip.AddrFrom4(a), bits)
}

// normalize sorts prefixes and drops those inside another, so that an nftables
// interval set takes them without overlaps.
func normalize(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Overlaps(p) {
			continue // sorted: the earlier one starts no later and, overlapping, contains p
		}
		out = append(out, p)
	}
	return out
}

func inPrefixes(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
