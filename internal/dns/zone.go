package dns

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// SchemaVersion is the version of the Kubernetes DNS specification the zone follows,
// published as the TXT record dns-version.<zone>.
const SchemaVersion = "1.1.0"

// zone computes the records of the cluster zone from a Cache. Names given to it are
// lowercase and fully qualified; the records it returns are owned by those lowercase
// names (the handler restores the question's case).
type zone struct {
	origin string // "cluster.local."
	ttl    uint32
	soa    *dns.SOA
}

// The Service whose ClusterIPs ns.dns.<zone> (the zone's name server) resolves to.
const (
	dnsServiceNamespace = "kube-system"
	dnsServiceName      = "kube-dns"
)

func newZone(origin string, ttl, serial uint32) *zone {
	z := &zone{origin: origin, ttl: ttl}
	z.soa = &dns.SOA{
		Hdr:     z.hdr(origin, dns.TypeSOA),
		Ns:      "ns.dns." + origin,
		Mbox:    "hostmaster." + origin,
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
	return z
}

func (z *zone) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: z.ttl}
}

// contains reports whether the lowercase fqdn name is the zone or below it.
func (z *zone) contains(name string) bool {
	return name == z.origin || (strings.HasSuffix(name, z.origin) && name[len(name)-len(z.origin)-1] == '.')
}

// node returns every record owned by name (lowercase fqdn inside the zone) and whether
// the name exists at all: a name with no records of its own exists when names below it
// do (an empty non-terminal), which makes the difference between NODATA and NXDOMAIN.
func (z *zone) node(c Cache, name string) ([]dns.RR, bool) {
	rel := strings.TrimSuffix(strings.TrimSuffix(name, z.origin), ".")
	if rel == "" {
		return []dns.RR{dns.Copy(z.soa), &dns.NS{Hdr: z.hdr(name, dns.TypeNS), Ns: z.soa.Ns}}, true
	}
	l := strings.Split(rel, ".")
	// r(i) is the i-th label counted from the zone: for a.b.svc.<zone>, r(0) = "svc".
	n := len(l)
	r := func(i int) string { return l[n-1-i] }
	switch r(0) {
	case "dns-version":
		if n == 1 {
			return []dns.RR{&dns.TXT{Hdr: z.hdr(name, dns.TypeTXT), Txt: []string{SchemaVersion}}}, true
		}
	case "dns":
		switch {
		case n == 1:
			return nil, true
		case n == 2 && r(1) == "ns":
			var addrs []netip.Addr
			if svc, ok := c.Service(dnsServiceNamespace, dnsServiceName); ok {
				addrs = clusterIPs(svc)
			}
			return z.addrRRs(name, addrs), true
		}
	case "svc":
		switch n {
		case 1:
			return nil, true
		case 2:
			return nil, c.NamespaceExists(r(1)) || c.HasServices(r(1))
		}
		svc, ok := c.Service(r(1), r(2))
		if !ok {
			return nil, false
		}
		return z.serviceNode(c, svc, name, l[:n-3])
	case "pod":
		switch n {
		case 1:
			return nil, true
		case 2:
			return nil, c.NamespaceExists(r(1))
		case 3:
			ip, ok := undash(r(2))
			if !ok {
				return nil, false
			}
			if p, ok := c.PodByIP(ip); ok && p.Namespace == r(1) {
				return z.addrRRs(name, []netip.Addr{ip}), true
			}
		}
	}
	return nil, false
}

// serviceNode answers name, which is the Service itself (below empty) or a name
// below it: _<proto> and _<port>._<proto> for SRV, <hostname> for a headless
// Service's endpoint.
func (z *zone) serviceNode(c Cache, svc *v1.Service, name string, below []string) ([]dns.RR, bool) {
	target := svc.Name + "." + svc.Namespace + ".svc." + z.origin
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		if len(below) > 0 || svc.Spec.ExternalName == "" {
			return nil, len(below) == 0
		}
		return []dns.RR{&dns.CNAME{Hdr: z.hdr(name, dns.TypeCNAME), Target: dns.Fqdn(strings.ToLower(svc.Spec.ExternalName))}}, true
	}
	headless := svc.Spec.ClusterIP == v1.ClusterIPNone
	var eps []endpoint
	if headless {
		eps = readyEndpoints(svc, c.EndpointSlices(svc.Namespace, svc.Name))
		if len(eps) == 0 {
			// No ready endpoint: the specification wants NXDOMAIN for the Service's name,
			// and then nothing below it can exist either.
			return nil, false
		}
	}
	switch len(below) {
	case 0:
		if !headless {
			return z.addrRRs(name, clusterIPs(svc)), true
		}
		var rrs []dns.RR
		for _, e := range eps {
			rrs = append(rrs, z.addrRRs(name, e.addrs)...)
		}
		return rrs, true
	case 1:
		label := below[0]
		if proto, ok := strings.CutPrefix(label, "_"); ok {
			return nil, len(z.srvs(svc, eps, headless, "", proto, target)) > 0
		}
		if !headless {
			return nil, false
		}
		var rrs []dns.RR
		for _, e := range eps {
			if e.host == label {
				rrs = append(rrs, z.addrRRs(name, e.addrs)...)
			}
		}
		return rrs, len(rrs) > 0
	case 2:
		port, ok1 := strings.CutPrefix(below[0], "_")
		proto, ok2 := strings.CutPrefix(below[1], "_")
		if !ok1 || !ok2 || port == "" {
			return nil, false
		}
		srvs := z.srvs(svc, eps, headless, port, proto, target)
		for _, s := range srvs {
			s.Hdr.Name = name
		}
		rrs := make([]dns.RR, len(srvs))
		for i, s := range srvs {
			rrs[i] = s
		}
		return rrs, len(rrs) > 0
	}
	return nil, false
}

// srvs returns the SRV records of the named ports matching port (any when empty) and
// proto: one per port targeting the Service, or for a headless Service one per ready
// endpoint and port targeting the endpoint's name with the endpoint's port.
func (z *zone) srvs(svc *v1.Service, eps []endpoint, headless bool, port, proto, target string) []*dns.SRV {
	match := func(name string, p v1.Protocol) bool {
		return name != "" && (port == "" || strings.ToLower(name) == port) && strings.ToLower(string(p)) == proto
	}
	var out []*dns.SRV
	if !headless {
		for _, p := range svc.Spec.Ports {
			if match(p.Name, p.Protocol) {
				out = append(out, &dns.SRV{Hdr: z.hdr(target, dns.TypeSRV), Priority: 0, Port: uint16(p.Port), Target: target})
			}
		}
	} else {
		for _, e := range eps {
			for _, p := range e.ports {
				if p.Name == nil || p.Port == nil {
					continue
				}
				pr := v1.ProtocolTCP
				if p.Protocol != nil {
					pr = *p.Protocol
				}
				if match(*p.Name, pr) {
					out = append(out, &dns.SRV{Hdr: z.hdr(target, dns.TypeSRV), Priority: 0, Port: uint16(*p.Port), Target: e.host + "." + target})
				}
			}
		}
	}
	// Equal shares of weight 100 (RFC 2782: clients pick among equal priorities by weight).
	for _, s := range out {
		s.Weight = uint16(max(1, 100/len(out)))
	}
	return out
}

// additional returns the address records of the SRV targets in answer.
func (z *zone) additional(c Cache, answer []dns.RR) []dns.RR {
	var extra []dns.RR
	seen := map[string]bool{}
	for _, rr := range answer {
		srv, ok := rr.(*dns.SRV)
		if !ok || seen[srv.Target] || !z.contains(srv.Target) {
			continue
		}
		seen[srv.Target] = true
		rrs, _ := z.node(c, srv.Target)
		for _, a := range rrs {
			if t := a.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
				extra = append(extra, a)
			}
		}
	}
	return extra
}

// ptr returns the PTR records for ip: the Services whose ClusterIP it is, and the
// ready endpoints of headless Services at that address.
func (z *zone) ptr(c Cache, name string, ip netip.Addr) []dns.RR {
	var rrs []dns.RR
	seen := map[string]bool{}
	add := func(target string) {
		if !seen[target] {
			seen[target] = true
			rrs = append(rrs, &dns.PTR{Hdr: z.hdr(name, dns.TypePTR), Ptr: target})
		}
	}
	for _, svc := range c.ServicesByIP(ip) {
		if svc.Spec.Type != v1.ServiceTypeExternalName {
			add(svc.Name + "." + svc.Namespace + ".svc." + z.origin)
		}
	}
	for _, s := range c.EndpointSlicesByIP(ip) {
		svc, ok := c.Service(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
		if !ok || svc.Spec.ClusterIP != v1.ClusterIPNone {
			continue
		}
		for _, e := range readyEndpoints(svc, []*discoveryv1.EndpointSlice{s}) {
			for _, a := range e.addrs {
				if a == ip {
					add(e.host + "." + svc.Name + "." + svc.Namespace + ".svc." + z.origin)
				}
			}
		}
	}
	return rrs
}

func (z *zone) addrRRs(name string, addrs []netip.Addr) []dns.RR {
	rrs := make([]dns.RR, 0, len(addrs))
	for _, a := range addrs {
		if a.Is4() {
			rrs = append(rrs, &dns.A{Hdr: z.hdr(name, dns.TypeA), A: a.AsSlice()})
		} else {
			rrs = append(rrs, &dns.AAAA{Hdr: z.hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return rrs
}

func clusterIPs(svc *v1.Service) []netip.Addr {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// endpoint is a ready endpoint of a headless Service: its name, addresses and the
// ports of its slice.
type endpoint struct {
	host  string
	addrs []netip.Addr
	ports []discoveryv1.EndpointPort
}

// readyEndpoints returns the endpoints of svc's slices that are ready (or all of them
// when the Service publishes not-ready addresses), each address once, named by their
// hostname or else by their dashed first address.
func readyEndpoints(svc *v1.Service, slices []*discoveryv1.EndpointSlice) []endpoint {
	var out []endpoint
	seen := map[netip.Addr]bool{}
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			e := endpoint{ports: s.Ports}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || seen[ip] {
					continue
				}
				seen[ip] = true
				e.addrs = append(e.addrs, ip)
			}
			if len(e.addrs) == 0 {
				continue
			}
			if ep.Hostname != nil && *ep.Hostname != "" {
				e.host = strings.ToLower(*ep.Hostname)
			} else {
				e.host = dashed(e.addrs[0])
			}
			out = append(out, e)
		}
	}
	return out
}

// dashed writes an address as one DNS label: 10.244.1.5 → 10-244-1-5,
// fd00::1 → fd00--1.
func dashed(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	return strings.ReplaceAll(a.String(), ":", "-")
}

// undash parses a label written by dashed.
func undash(label string) (netip.Addr, bool) {
	if strings.Count(label, "-") == 3 {
		a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", "."))
		return a, err == nil && a.Is4()
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	return a, err == nil && a.Is6()
}
