package dns

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is the answering part of the server's configuration.
type Config struct {
	// Zone is the cluster domain (cluster.local).
	Zone string
	// TTL of every record of the zone, and of negative answers; 0 means 5 seconds.
	TTL uint32
	// Upstreams are host:port resolvers for names outside the zone; none means such
	// names are REFUSED.
	Upstreams []string
	// CacheEntries bounds the forwarding cache (default 10,000 answers).
	CacheEntries int
	// ForwardTimeout bounds one upstream exchange (default 2 s).
	ForwardTimeout time.Duration
	// ReverseCIDRs are the address ranges whose reverse zones the server answers
	// authoritatively, an address nobody holds being NXDOMAIN there (the service and
	// pod CIDRs; see reverse.go); reverse names of other addresses go upstream.
	ReverseCIDRs []netip.Prefix
	// NoAutopath turns off answering pods' search-expanded names on the first query.
	NoAutopath bool
	// Serial of the zone's SOA; 0 means the start time.
	Serial uint32
	// ServerLabel is the metrics' "server" label (dns://:53).
	ServerLabel string
	// Metrics registers the CoreDNS-named metrics; nil keeps them unregistered.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Handler answers DNS messages: the cluster zone from a Cache, other names through the
// forwarder. It is a miekg/dns Handler; Respond is the same logic on parsed messages.
type Handler struct {
	zone     *zone
	reverse  reverseZones
	cache    Cache
	fwd      *forwarder
	autopath bool
	m        *metrics
	log      *slog.Logger
	now      func() time.Time
}

// maxChase bounds the CNAME chains the handler follows inside the zone.
const maxChase = 8

// NewHandler checks cfg and returns a Handler answering from c.
func NewHandler(cfg Config, c Cache) (*Handler, error) {
	zoneName := strings.ToLower(strings.TrimSuffix(cfg.Zone, "."))
	if zoneName == "" {
		return nil, fmt.Errorf("cluster domain: must not be empty")
	}
	if _, ok := dns.IsDomainName(zoneName); !ok {
		return nil, fmt.Errorf("cluster domain %q: not a domain name", cfg.Zone)
	}
	for _, u := range cfg.Upstreams {
		if _, err := netip.ParseAddrPort(u); err != nil {
			return nil, fmt.Errorf("upstream %q: want IP:port (%v)", u, err)
		}
	}
	reverse, err := newReverseZones(cfg.ReverseCIDRs)
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = 5
	}
	serial := cfg.Serial
	if serial == 0 {
		serial = uint32(now().Unix())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	label := cfg.ServerLabel
	if label == "" {
		label = "dns://:53"
	}
	origin := zoneName + "."
	h := &Handler{zone: newZone(origin, ttl, serial), reverse: reverse, cache: c, autopath: !cfg.NoAutopath,
		m: newMetrics(cfg.Metrics, label, origin), log: log, now: now}
	if len(cfg.Upstreams) > 0 {
		h.fwd = newForwarder(cfg.Upstreams, cfg.CacheEntries, cfg.ForwardTimeout, h.m, now)
	}
	return h, nil
}

// ServeDNS answers one message read by a miekg/dns server.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := h.now()
	proto := "udp"
	var from netip.Addr
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		from, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		from, _ = netip.AddrFromSlice(a.IP)
		proto = "tcp"
	}
	defer func() {
		if r := recover(); r != nil {
			h.m.panics.Inc()
			h.log.Error("panic answering a DNS query", "panic", r, "from", from)
			fail := new(dns.Msg)
			fail.SetRcode(req, dns.RcodeServerFailure)
			_ = w.WriteMsg(fail)
		}
	}()
	resp, plugin := h.respond(context.Background(), req, from.Unmap(), proto == "udp")
	if resp == nil {
		return
	}
	// Packed here rather than by WriteMsg so that the response size metric costs
	// nothing; counted before the answer leaves, so a client that got it sees it counted.
	buf, err := resp.Pack()
	if err != nil {
		h.log.Error("packing a DNS answer", "to", w.RemoteAddr(), "err", err)
		fail := new(dns.Msg)
		fail.SetRcode(req, dns.RcodeServerFailure)
		resp, buf = fail, nil
		if buf, err = fail.Pack(); err != nil {
			return
		}
	}
	h.count(req, resp, plugin, proto, from, start, len(buf))
	if _, err := w.Write(buf); err != nil {
		h.log.Debug("writing a DNS answer", "to", w.RemoteAddr(), "err", err)
	}
}

// count records one answered request in CoreDNS's request metrics.
func (h *Handler) count(req, resp *dns.Msg, plugin, proto string, from netip.Addr, start time.Time, respSize int) {
	family := "1"
	if from.Is6() && !from.Is4In6() {
		family = "2"
	}
	qtype := "other"
	if len(req.Question) == 1 {
		qtype = typeLabel(req.Question[0].Qtype)
	}
	zoneLabel := "."
	if len(req.Question) == 1 && h.zone.contains(strings.ToLower(req.Question[0].Name)) {
		zoneLabel = h.zone.origin
	}
	h.m.requests.WithLabelValues(h.m.server, zoneLabel, "", proto, family, qtype).Inc()
	h.m.responses.WithLabelValues(h.m.server, zoneLabel, "", rcodeLabel(resp.Rcode), plugin).Inc()
	h.m.duration.WithLabelValues(h.m.server, zoneLabel, "", qtype).Observe(h.now().Sub(start).Seconds())
	h.m.requestSize.WithLabelValues(h.m.server, zoneLabel, "", proto).Observe(float64(req.Len()))
	h.m.responseSize.WithLabelValues(h.m.server, zoneLabel, "", proto).Observe(float64(respSize))
}

// Respond returns the answer to req from the client at from, sized for UDP when udp
// is true; nil means no answer at all (req is itself a response).
func (h *Handler) Respond(ctx context.Context, req *dns.Msg, from netip.Addr, udp bool) *dns.Msg {
	resp, _ := h.respond(ctx, req, from, udp)
	return resp
}

// respond is Respond that also names the part that wrote the answer, as CoreDNS's
// plugin label does: "kubernetes" for the cluster's zones, "cache" or "forward" for
// other names, "" for a refusal or a malformed request.
func (h *Handler) respond(ctx context.Context, req *dns.Msg, from netip.Addr, udp bool) (resp *dns.Msg, plugin string) {
	if req.Response {
		return nil, ""
	}
	resp = &dns.Msg{}
	resp.Id, resp.Response, resp.Opcode = req.Id, true, req.Opcode
	resp.RecursionDesired, resp.CheckingDisabled = req.RecursionDesired, req.CheckingDisabled
	if len(req.Question) == 1 {
		resp.Question = []dns.Question{req.Question[0]}
	}
	if req.Opcode != dns.OpcodeQuery {
		resp.Rcode = dns.RcodeNotImplemented
		return resp, ""
	}
	var opt *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil {
				resp.Rcode = dns.RcodeFormatError // RFC 6891 6.1.1: at most one OPT
				return resp, ""
			}
			opt = o
		}
	}
	if len(req.Question) != 1 || len(req.Answer) > 0 || len(req.Ns) > 0 {
		resp.Rcode = dns.RcodeFormatError
		return resp, ""
	}
	size := dns.MinMsgSize
	if opt != nil {
		if opt.Hdr.Name != "." {
			resp.Rcode = dns.RcodeFormatError
			return resp, ""
		}
		resp.SetEdns0(1232, false)
		if opt.Version() != 0 {
			resp.Rcode = dns.RcodeBadVers
			return resp, ""
		}
		size = max(size, min(int(opt.UDPSize()), 1232))
	}
	q := req.Question[0]
	switch {
	case q.Qclass != dns.ClassINET:
		resp.Rcode = dns.RcodeRefused
	case q.Qtype == dns.TypeOPT:
		resp.Rcode = dns.RcodeFormatError
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		resp.Rcode = dns.RcodeRefused
	case q.Qtype >= 128 && q.Qtype < 255, q.Qtype == 0:
		resp.Rcode = dns.RcodeNotImplemented
	default:
		plugin = h.answer(ctx, resp, q, from)
	}
	if udp {
		resp.Truncate(size)
	} else {
		resp.Truncate(dns.MaxMsgSize)
	}
	return resp, plugin
}

// answer fills resp for a valid question and names who answered (see respond).
func (h *Handler) answer(ctx context.Context, resp *dns.Msg, q dns.Question, from netip.Addr) string {
	name := strings.ToLower(q.Name)
	resp.RecursionAvailable = h.fwd != nil
	if h.zone.contains(name) {
		h.answerZone(ctx, resp, q, name, from)
		return "kubernetes"
	}
	if r, ok := parseReverse(name); ok {
		if apex, ok := h.reverse.apex(r); ok {
			h.answerReverse(resp, q, name, r, apex)
			return "kubernetes"
		}
		// Outside the reverse zones, an address of the cluster (a headless Service's
		// endpoint elsewhere) still has its PTR; any other name is the upstreams'.
		if r.full() {
			if !h.cache.Synced() {
				resp.Rcode = dns.RcodeServerFailure
				return "kubernetes"
			}
			if rrs := h.zone.ptr(h.cache, name, r.addr); len(rrs) > 0 {
				resp.Authoritative = true
				if q.Qtype == dns.TypePTR || q.Qtype == dns.TypeANY {
					resp.Answer = keepCase(rrs, name, q.Name)
				}
				return "kubernetes"
			}
		}
	}
	return h.forward(ctx, resp, q, name)
}

// answerZone answers a name of the cluster zone.
func (h *Handler) answerZone(ctx context.Context, resp *dns.Msg, q dns.Question, name string, from netip.Addr) {
	if !h.cache.Synced() {
		resp.Rcode = dns.RcodeServerFailure
		return
	}
	resp.Authoritative = true
	rrs, exists := h.zone.node(h.cache, name)
	if !exists {
		if h.autopath && h.searchExpanded(ctx, resp, q, name, from) {
			return
		}
		resp.Rcode = dns.RcodeNameError
		resp.Ns = []dns.RR{h.zone.soa}
		return
	}
	answer, rcode, final := h.follow(ctx, rrs, name, q.Qtype, 0)
	resp.Answer = keepCase(answer, name, q.Name)
	resp.Rcode = rcode
	negative := rcode == dns.RcodeNameError || len(answer) == 0 || (q.Qtype != dns.TypeANY && !hasType(answer, final, q.Qtype))
	if negative && h.zone.contains(final) {
		resp.Ns = []dns.RR{h.zone.soa}
	}
	if q.Qtype == dns.TypeSRV {
		resp.Extra = append(resp.Extra, h.zone.additional(h.cache, answer)...)
	}
}

// follow selects from rrs (the records at name) those of qtype, following a CNAME
// inside the zone, or through the forwarder outside it. It returns the answer, the
// rcode of the last name of the chain and that name.
func (h *Handler) follow(ctx context.Context, rrs []dns.RR, name string, qtype uint16, depth int) ([]dns.RR, int, string) {
	var cname *dns.CNAME
	var out []dns.RR
	for _, rr := range rrs {
		if c, ok := rr.(*dns.CNAME); ok {
			cname = c
		}
		if qtype == dns.TypeANY || rr.Header().Rrtype == qtype {
			out = append(out, rr)
		}
	}
	if cname == nil || qtype == dns.TypeCNAME || qtype == dns.TypeANY {
		return out, dns.RcodeSuccess, name
	}
	out = []dns.RR{cname}
	target := cname.Target
	if depth >= maxChase {
		return out, dns.RcodeSuccess, target
	}
	if h.zone.contains(target) {
		next, exists := h.zone.node(h.cache, target)
		if !exists {
			return out, dns.RcodeNameError, target
		}
		more, rcode, final := h.follow(ctx, next, target, qtype, depth+1)
		return append(out, more...), rcode, final
	}
	if h.fwd == nil {
		return out, dns.RcodeSuccess, target
	}
	m, _, err := h.fwd.resolve(ctx, target, qtype)
	if err != nil {
		h.log.Debug("following an ExternalName", "target", target, "err", err)
		return out, dns.RcodeSuccess, target
	}
	return append(out, m.Answer...), m.Rcode, target
}

// searchExpanded answers a name a pod's resolver built from its first search domain
// (<name>.<its namespace>.svc.<zone>) with the answer its resolver would reach at the
// end of its walk: the next search domains, then the name itself. The answer is a
// CNAME from the asked name to the name that has data, then that data, so the stub
// gets an answer for the name it asked and stops walking (CoreDNS's autopath trick).
// Nothing changes when no later step has data of the asked type: the stub walks on.
func (h *Handler) searchExpanded(ctx context.Context, resp *dns.Msg, q dns.Question, name string, from netip.Addr) bool {
	if !from.IsValid() {
		return false
	}
	pod, ok := h.cache.PodByIP(from)
	if !ok || !pod.StandardSearch {
		return false
	}
	base, ok := strings.CutSuffix(name, "."+pod.Namespace+".svc."+h.zone.origin)
	if !ok || base == "" {
		return false
	}
	for _, cand := range []string{base + ".svc." + h.zone.origin, base + "." + h.zone.origin, base + "."} {
		var answer []dns.RR
		rcode := dns.RcodeSuccess
		if h.zone.contains(cand) {
			rrs, exists := h.zone.node(h.cache, cand)
			if !exists {
				continue
			}
			answer, rcode, _ = h.follow(ctx, rrs, cand, q.Qtype, 0)
		} else {
			if h.fwd == nil {
				return false
			}
			m, _, err := h.fwd.resolve(ctx, cand, q.Qtype)
			if err != nil {
				return false
			}
			answer, rcode = m.Answer, m.Rcode
		}
		if rcode != dns.RcodeSuccess || !answersType(answer, q.Qtype) {
			continue
		}
		cname := &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: h.zone.ttl}, Target: cand}
		resp.Answer = append([]dns.RR{cname}, answer...)
		h.m.autopath.WithLabelValues(h.m.server).Inc()
		return true
	}
	return false
}

// answersType reports whether answer holds a record of qtype (or is a CNAME question's).
func answersType(answer []dns.RR, qtype uint16) bool {
	for _, rr := range answer {
		if t := rr.Header().Rrtype; t == qtype || qtype == dns.TypeANY {
			return true
		}
	}
	return false
}

func hasType(answer []dns.RR, owner string, qtype uint16) bool {
	for _, rr := range answer {
		if rr.Header().Rrtype == qtype && strings.EqualFold(rr.Header().Name, owner) {
			return true
		}
	}
	return false
}

// forward answers a name outside the zone through the upstreams.
func (h *Handler) forward(ctx context.Context, resp *dns.Msg, q dns.Question, name string) (plugin string) {
	if h.fwd == nil {
		resp.Rcode = dns.RcodeRefused
		return ""
	}
	m, cached, err := h.fwd.resolve(ctx, name, q.Qtype)
	if err != nil {
		h.log.Debug("forwarding", "name", name, "type", dns.TypeToString[q.Qtype], "err", err)
		resp.Rcode = dns.RcodeServerFailure
		return "forward"
	}
	resp.Rcode = m.Rcode
	resp.Answer = keepCase(m.Answer, name, q.Name)
	resp.Ns = m.Ns
	resp.Extra = append(resp.Extra, m.Extra...)
	if cached {
		return "cache"
	}
	return "forward"
}

// keepCase gives the records owned by name (lowercase) the question's spelling; the
// records are the caller's.
func keepCase(rrs []dns.RR, name, asked string) []dns.RR {
	if name == asked {
		return rrs
	}
	for _, rr := range rrs {
		if h := rr.Header(); h.Name == name {
			h.Name = asked
		}
	}
	return rrs
}
