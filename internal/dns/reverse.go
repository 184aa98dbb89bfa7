package dns

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// Reverse zones.
//
// The addresses of the service and pod CIDRs exist only inside the cluster, so no
// upstream resolver can know their reverse names: forwarding them leaks the cluster's
// addressing to the host's resolvers and, at best, earns an NXDOMAIN from a public
// server after a round trip (or a timeout, as pods have no route out). The server is
// therefore authoritative for the reverse zones of those CIDRs, as CoreDNS is when its
// kubernetes plugin is given the CIDRs as zones (`kubernetes cluster.local
// 10.96.0.0/12`), and without CoreDNS's `fallthrough in-addr.arpa ip6.arpa`: an
// address nobody holds is NXDOMAIN with the reverse zone's SOA. Reverse names of other
// addresses are still forwarded (a headless Service's endpoint outside the CIDRs keeps
// its PTR).
//
// A reverse zone sits on a label boundary (8 bits in in-addr.arpa, 4 in ip6.arpa), so
// a CIDR that is not on one becomes several zones, its prefix rounded up to the next
// boundary (RFC 2317's problem, solved as CoreDNS does): 10.96.0.0/12 is the sixteen
// zones 96.10.in-addr.arpa. to 111.10.in-addr.arpa., and 10.244.0.0/16 the one zone
// 244.10.in-addr.arpa. Rounding down instead would claim addresses outside the CIDR
// (all of 10.0.0.0/8, the node underlay included).
//
// Each zone has an SOA and an NS at its apex naming the cluster zone's name server and
// mailbox (ns.dns.<zone>, which resolves to kube-dns; the Kubernetes DNS specification
// says nothing of reverse zones beyond the PTR records). Names between the apex and a
// full address are answered as empty non-terminals (NOERROR, no data) whether or not an
// address below them is in use: the answer never denies a name that may exist, which
// matters to resolvers that treat NXDOMAIN as covering the whole subtree (RFC 8020).
// Names that cannot be addresses (labels that are not numbers, too many labels) are
// NXDOMAIN.

// reverseName is a name below in-addr.arpa. or ip6.arpa. read as an address prefix:
// the address labels it has, from the zone down, until one is not an address label.
type reverseName struct {
	// addr holds the labels read, the bits after them zero.
	addr netip.Addr
	// bits is how many leading bits of addr the name gives (8 per in-addr.arpa label, 4
	// per ip6.arpa label).
	bits int
	// extra counts the labels left of those: not address labels, or beyond a full address.
	extra int
}

// full reports whether the name is exactly one address.
func (r reverseName) full() bool { return r.extra == 0 && r.bits == r.addr.BitLen() }

// reverseFamily is how one of the two reverse trees writes addresses.
type reverseFamily struct {
	suffix string // "in-addr.arpa."
	unit   int    // bits per label
	labels int    // labels of a full address
	parse  func(label string) (uint8, bool)
}

var (
	reverseV4 = reverseFamily{suffix: "in-addr.arpa.", unit: 8, labels: 4, parse: func(s string) (uint8, bool) {
		// Decimal without leading zeros: 010 is not the label of 10.
		v, err := strconv.ParseUint(s, 10, 8)
		return uint8(v), err == nil && (len(s) == 1 || s[0] != '0')
	}}
	reverseV6 = reverseFamily{suffix: "ip6.arpa.", unit: 4, labels: 32, parse: func(s string) (uint8, bool) {
		v, err := strconv.ParseUint(s, 16, 8)
		return uint8(v), err == nil && len(s) == 1
	}}
)

// parseReverse reads a lowercase fqdn below (or at) in-addr.arpa. or ip6.arpa.
func parseReverse(name string) (reverseName, bool) {
	for _, f := range []reverseFamily{reverseV4, reverseV6} {
		var rest string
		switch {
		case name == f.suffix:
		case strings.HasSuffix(name, "."+f.suffix):
			rest = strings.TrimSuffix(name, "."+f.suffix)
		default:
			continue
		}
		var labels []string
		if rest != "" {
			labels = strings.Split(rest, ".")
		}
		b := make([]byte, f.labels*f.unit/8)
		read := 0
		for i := len(labels) - 1; i >= 0 && read < f.labels; i-- {
			v, ok := f.parse(labels[i])
			if !ok {
				break
			}
			if f.unit == 8 {
				b[read] = v
			} else if read%2 == 0 {
				b[read/2] = v << 4
			} else {
				b[read/2] |= v
			}
			read++
		}
		addr, _ := netip.AddrFromSlice(b)
		return reverseName{addr: addr, bits: read * f.unit, extra: len(labels) - read}, true
	}
	return reverseName{}, false
}

// reverseAddr parses a lowercase fqdn below in-addr.arpa. or ip6.arpa. naming one
// full address.
func reverseAddr(name string) (netip.Addr, bool) {
	r, ok := parseReverse(name)
	if !ok || !r.full() {
		return netip.Addr{}, false
	}
	return r.addr, true
}

// reverseZones are the reverse zones of a set of CIDRs.
type reverseZones []netip.Prefix

// newReverseZones checks and normalises the CIDRs.
func newReverseZones(cidrs []netip.Prefix) (reverseZones, error) {
	var z reverseZones
	for _, p := range cidrs {
		if !p.IsValid() || p.Addr().Is4In6() {
			return nil, fmt.Errorf("reverse zone CIDR %q: want an IPv4 or IPv6 CIDR", p)
		}
		z = append(z, p.Masked())
	}
	return z, nil
}

// apex returns the apex of the reverse zone name falls in: the prefix of name's
// address rounded up to a label boundary, from the CIDR that gives the largest zone
// (so overlapping CIDRs give one answer whatever their order).
func (z reverseZones) apex(r reverseName) (netip.Prefix, bool) {
	var best netip.Prefix
	for _, p := range z {
		if p.Addr().Is4() != r.addr.Is4() {
			continue
		}
		unit := reverseV6.unit
		if p.Addr().Is4() {
			unit = reverseV4.unit
		}
		bits := (p.Bits() + unit - 1) / unit * unit
		if r.bits < bits || !p.Contains(r.addr) {
			continue
		}
		if !best.IsValid() || bits < best.Bits() {
			best = netip.PrefixFrom(r.addr, bits).Masked()
		}
	}
	return best, best.IsValid()
}

// apexName writes the apex of a reverse zone as a domain name.
func apexName(p netip.Prefix) string {
	f := reverseV6
	if p.Addr().Is4() {
		f = reverseV4
	}
	b := p.Addr().AsSlice()
	labels := make([]string, 0, p.Bits()/f.unit+1)
	for i := p.Bits()/f.unit - 1; i >= 0; i-- {
		if f.unit == 8 {
			labels = append(labels, strconv.Itoa(int(b[i])))
		} else {
			labels = append(labels, strconv.FormatUint(uint64(b[i/2]>>(4*(1-i%2))&0xf), 16))
		}
	}
	return strings.Join(append(labels, f.suffix), ".")
}

// answerReverse answers a name inside one of the reverse zones, whose apex is apex.
func (h *Handler) answerReverse(resp *dns.Msg, q dns.Question, name string, r reverseName, apex netip.Prefix) {
	if !h.cache.Synced() {
		resp.Rcode = dns.RcodeServerFailure
		return
	}
	resp.Authoritative = true
	origin := apexName(apex)
	soa := dns.Copy(h.zone.soa).(*dns.SOA)
	soa.Hdr.Name = origin
	var rrs []dns.RR
	if r.extra == 0 && r.bits == apex.Bits() {
		rrs = []dns.RR{dns.Copy(soa), &dns.NS{Hdr: h.zone.hdr(name, dns.TypeNS), Ns: h.zone.soa.Ns}}
	}
	if r.full() {
		rrs = append(rrs, h.zone.ptr(h.cache, name, r.addr)...)
	}
	// Below the apex, only full addresses with a PTR exist; the names in between are
	// empty non-terminals (see above).
	if len(rrs) == 0 && (r.extra > 0 || r.full()) {
		resp.Rcode = dns.RcodeNameError
	}
	for _, rr := range rrs {
		if q.Qtype == dns.TypeANY || rr.Header().Rrtype == q.Qtype {
			resp.Answer = append(resp.Answer, rr)
		}
	}
	if len(resp.Answer) == 0 {
		resp.Ns = []dns.RR{soa}
	}
	resp.Answer = keepCase(resp.Answer, name, q.Name)
}
