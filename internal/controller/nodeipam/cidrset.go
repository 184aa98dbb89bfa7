package nodeipam

import (
	"fmt"
	"net/netip"
	"slices"
)

// maxSubnetBits bounds how many bits a node subnet may add to the cluster
// CIDR's prefix, as Kubernetes' CIDR set does: at most 65536 node subnets,
// so scanning for the first free one stays cheap.
const maxSubnetBits = 16

// cidrSet divides a cluster CIDR into equal node subnets and records which
// node holds which. It does no I/O and is not safe for concurrent use.
type cidrSet struct {
	cluster netip.Prefix
	mask    int
	count   int
	owner   map[int]string
	byNode  map[string][]int
}

// newCIDRSet returns an empty set of the /mask subnets of cluster.
func newCIDRSet(cluster netip.Prefix, mask int) (*cidrSet, error) {
	if !cluster.IsValid() {
		return nil, fmt.Errorf("cluster CIDR %v is not valid", cluster)
	}
	cluster = cluster.Masked()
	if mask < cluster.Bits() || mask > cluster.Addr().BitLen() {
		return nil, fmt.Errorf("node mask size %d must lie between the cluster CIDR's %d and %d", mask, cluster.Bits(), cluster.Addr().BitLen())
	}
	if mask-cluster.Bits() > maxSubnetBits {
		return nil, fmt.Errorf("node mask size %d is too big for cluster CIDR %v: at most %d more bits are allowed", mask, cluster, maxSubnetBits)
	}
	return &cidrSet{
		cluster: cluster,
		mask:    mask,
		count:   1 << (mask - cluster.Bits()),
		owner:   map[int]string{},
		byNode:  map[string][]int{},
	}, nil
}

// subnet returns the i-th node subnet: the cluster address with i written
// into the bits between the cluster's prefix and the node mask.
func (s *cidrSet) subnet(i int) netip.Prefix {
	b := s.cluster.Addr().AsSlice()
	for pos := s.mask - 1; pos >= s.cluster.Bits(); pos-- {
		if i&1 == 1 {
			b[pos/8] |= 0x80 >> (pos % 8)
		}
		i >>= 1
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(addr, s.mask)
}

// index returns the number of the node subnet holding addr, which must lie
// in the cluster CIDR.
func (s *cidrSet) index(addr netip.Addr) int {
	b := addr.AsSlice()
	i := 0
	for pos := s.cluster.Bits(); pos < s.mask; pos++ {
		i = i<<1 | int(b[pos/8]>>(7-pos%8)&1)
	}
	return i
}

// covered returns the node subnets p overlaps, in order: all those inside a
// p wider than a node subnet, else the one holding p. It returns none when
// p is of another family or outside the cluster CIDR.
func (s *cidrSet) covered(p netip.Prefix) []int {
	p = p.Masked()
	if !p.IsValid() || p.Addr().BitLen() != s.cluster.Addr().BitLen() || !s.cluster.Overlaps(p) {
		return nil
	}
	if p.Bits() < s.cluster.Bits() {
		p = s.cluster
	}
	first := s.index(p.Addr())
	n := 1
	if p.Bits() < s.mask {
		n = 1 << (s.mask - p.Bits())
	}
	out := make([]int, n)
	for k := range out {
		out[k] = first + k
	}
	return out
}

// occupy records that node holds the subnets its CIDRs cover, replacing
// what it held before. It returns the other nodes that already held one of
// them: a conflict made outside this controller, which it leaves alone.
func (s *cidrSet) occupy(node string, cidrs []netip.Prefix) (conflicts []string) {
	s.release(node)
	var held []int
	for _, c := range cidrs {
		for _, i := range s.covered(c) {
			if other, ok := s.owner[i]; ok {
				if !slices.Contains(conflicts, other) {
					conflicts = append(conflicts, other)
				}
				continue
			}
			s.owner[i] = node
			held = append(held, i)
		}
	}
	if len(held) > 0 {
		s.byNode[node] = held
	}
	return conflicts
}

// allocate gives node the lowest free subnet, or returns its own when it
// already holds one; ok is false when every subnet is taken.
func (s *cidrSet) allocate(node string) (p netip.Prefix, ok bool) {
	if held, have := s.byNode[node]; have {
		return s.subnet(held[0]), true
	}
	for i := range s.count {
		if _, taken := s.owner[i]; !taken {
			s.owner[i] = node
			s.byNode[node] = []int{i}
			return s.subnet(i), true
		}
	}
	return netip.Prefix{}, false
}

// release frees every subnet node holds.
func (s *cidrSet) release(node string) {
	for _, i := range s.byNode[node] {
		delete(s.owner, i)
	}
	delete(s.byNode, node)
}
