package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeUpstream is a resolver on loopback answering from a fixed table of zone-file
// lines; names not in it are NXDOMAIN with an SOA. It counts the questions it gets.
type fakeUpstream struct {
	addr    string
	mu      sync.Mutex
	records map[string][]dns.RR // "name type" → records
	asked   map[string]int
	total   atomic.Int64
	delay   atomic.Int64 // nanoseconds each answer waits
}

func newFakeUpstream(t testing.TB, lines ...string) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{records: map[string][]dns.RR{}, asked: map[string]int{}}
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("fake upstream record %q: %v", l, err)
		}
		k := strings.ToLower(rr.Header().Name) + " " + dns.TypeToString[rr.Header().Rrtype]
		u.records[k] = append(u.records[k], rr)
	}
	pc, ln, err := listenSamePort()
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	s1 := &dns.Server{PacketConn: pc, Handler: u}
	s2 := &dns.Server{Listener: ln, Handler: u}
	go func() { _ = s1.ActivateAndServe() }()
	go func() { _ = s2.ActivateAndServe() }()
	t.Cleanup(func() { _ = s1.Shutdown(); _ = s2.Shutdown() })
	return u
}

// listenSamePort opens UDP and TCP on one loopback port, as a resolver listens. The
// kernel picks a free UDP port, which another process may hold for TCP: try again with
// another then.
func listenSamePort() (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("no loopback port free for both UDP and TCP: %w", lastErr)
}

const upstreamSOA = "example.com. 300 IN SOA ns.example.com. h.example.com. 1 2 3 4 60"

func (u *fakeUpstream) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	k := strings.ToLower(q.Name) + " " + dns.TypeToString[q.Qtype]
	u.mu.Lock()
	u.asked[k]++
	rrs := u.records[k]
	exists := len(rrs) > 0
	for key := range u.records {
		if strings.HasPrefix(key, strings.ToLower(q.Name)+" ") {
			exists = true
		}
	}
	u.mu.Unlock()
	u.total.Add(1)
	time.Sleep(time.Duration(u.delay.Load()))
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	m.Answer = rrs
	if len(rrs) == 0 {
		soa, _ := dns.NewRR(upstreamSOA)
		m.Ns = []dns.RR{soa}
		if !exists {
			m.Rcode = dns.RcodeNameError
		}
	}
	_ = w.WriteMsg(m)
}

func (u *fakeUpstream) count(q string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.asked[q]
}

// clock is a settable time for cache tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestForwardingAndCache(t *testing.T) {
	up := newFakeUpstream(t,
		"api.example.com. 60 IN A 192.0.2.10",
		"short.example.com. 3 IN A 192.0.2.11",
		"www.example.com. 300 IN CNAME api.example.com.",
		"ma-base-de-donnees.mon-fournisseur-cloud.com. 120 IN A 192.0.2.53",
	)
	clk := &clock{t: time.Unix(1_000_000, 0)}
	reg := prometheus.NewRegistry()
	h := newTestHandler(t, fakeCluster(t), Config{Upstreams: []string{up.addr}, Now: clk.now, Metrics: reg})

	// Forwarded, then from the cache with the TTL aged, then again after expiry.
	diff(t, "first", `
		NOERROR ra
		ANSWER
		Api.Example.com. 60 IN A 192.0.2.10`, ask(t, h, "Api.Example.com. A", "", true, 0))
	clk.add(20 * time.Second)
	diff(t, "cached", `
		NOERROR ra
		ANSWER
		api.example.com. 40 IN A 192.0.2.10`, ask(t, h, "api.example.com. A", "", true, 0))
	if n := up.count("api.example.com. A"); n != 1 {
		t.Fatalf("upstream asked %d times, want 1 (the second answer comes from the cache)", n)
	}
	clk.add(41 * time.Second)
	ask(t, h, "api.example.com. A", "", true, 0)
	if n := up.count("api.example.com. A"); n != 2 {
		t.Fatalf("upstream asked %d times after expiry, want 2", n)
	}

	// Negative answers are kept min(SOA TTL, SOA MINIMUM) = 60 s (RFC 2308).
	diff(t, "nxdomain", `
		NXDOMAIN ra
		AUTHORITY
		`+upstreamSOA, ask(t, h, "nope.example.com. A", "", true, 0))
	clk.add(59 * time.Second)
	ask(t, h, "nope.example.com. A", "", true, 0)
	if n := up.count("nope.example.com. A"); n != 1 {
		t.Fatalf("NXDOMAIN asked upstream %d times within its negative TTL, want 1", n)
	}
	clk.add(2 * time.Second)
	ask(t, h, "nope.example.com. A", "", true, 0)
	if n := up.count("nope.example.com. A"); n != 2 {
		t.Fatalf("NXDOMAIN asked upstream %d times after its negative TTL, want 2", n)
	}
	diff(t, "nodata", `
		NOERROR ra
		AUTHORITY
		`+upstreamSOA, ask(t, h, "api.example.com. AAAA", "", true, 0))

	// The ExternalName of seed 003 is followed through the upstream.
	diff(t, "externalname", `
		NOERROR aa ra
		ANSWER
		bdd-externe.production.svc.cluster.local. 5 IN CNAME ma-base-de-donnees.mon-fournisseur-cloud.com.
		ma-base-de-donnees.mon-fournisseur-cloud.com. 120 IN A 192.0.2.53`, ask(t, h, "bdd-externe.production.svc.cluster.local. A", "", true, 0))

	// Unknown reverse names go upstream too.
	diff(t, "reverse", `
		NXDOMAIN ra
		AUTHORITY
		`+upstreamSOA, ask(t, h, "99.0.96.10.in-addr.arpa. PTR", "", true, 0))

	for _, name := range []string{"coredns_cache_hits_total", "coredns_cache_misses_total", "coredns_cache_entries",
		"coredns_forward_requests_total", "coredns_forward_responses_total"} {
		if n := seriesCount(t, reg, name); n == 0 {
			t.Errorf("metric %s: no series", name)
		}
	}
	hits := counterValue(h.m.cacheHits.WithLabelValues(h.m.server, "success", ".", ""))
	denials := counterValue(h.m.cacheHits.WithLabelValues(h.m.server, "denial", ".", ""))
	if hits != 1 || denials != 1 {
		t.Errorf("cache hits: %v success, %v denial; want 1 and 1", hits, denials)
	}
}

// TestResponsePlugin: coredns_dns_responses_total names who answered, as CoreDNS's
// plugin label does: the cluster's zones, the cache, an upstream, or nobody.
func TestResponsePlugin(t *testing.T) {
	up := newFakeUpstream(t, "api.example.com. 60 IN A 192.0.2.10")
	reg := prometheus.NewRegistry()
	h := newTestHandler(t, fakeCluster(t), Config{Metrics: reg, Upstreams: []string{up.addr}})
	addr, _ := serve(t, h)
	c := &dns.Client{}
	for _, q := range []string{
		"api-svc.demo.svc.cluster.local. A", // kubernetes
		"10.0.96.10.in-addr.arpa. PTR",      // kubernetes (reverse zone)
		"api.example.com. A",                // forward
		"api.example.com. A",                // cache
	} {
		if _, _, err := c.Exchange(query(t, q, 0), addr); err != nil {
			t.Fatal(err)
		}
	}
	m := new(dns.Msg)
	m.SetQuestion("api.example.com.", dns.TypeA)
	m.Question[0].Qclass = dns.ClassCHAOS // refused: nobody answers
	if _, _, err := c.Exchange(m, addr); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		zone, rcode, plugin string
		want                float64
	}{
		{"cluster.local.", "NOERROR", "kubernetes", 1},
		{".", "NOERROR", "kubernetes", 1},
		{".", "NOERROR", "forward", 1},
		{".", "NOERROR", "cache", 1},
		{".", "REFUSED", "", 1},
	} {
		if got := counterValue(h.m.responses.WithLabelValues("dns://:53", tc.zone, "", tc.rcode, tc.plugin)); got != tc.want {
			t.Errorf("responses{zone=%q, rcode=%s, plugin=%q} = %v, want %v", tc.zone, tc.rcode, tc.plugin, got, tc.want)
		}
	}
}

// TestServedMetrics: requests through the server count under CoreDNS's names.
func TestServedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newTestHandler(t, fakeCluster(t), Config{Metrics: reg})
	addr, _ := serve(t, h)
	c := &dns.Client{}
	for range 3 {
		if _, _, err := c.Exchange(query(t, "api-svc.demo.svc.cluster.local. A", 0), addr); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Exchange(query(t, "nope.demo.svc.cluster.local. A", 0), addr); err != nil {
		t.Fatal(err)
	}
	got := counterValue(h.m.requests.WithLabelValues("dns://:53", "cluster.local.", "", "udp", "1", "A"))
	nx := counterValue(h.m.responses.WithLabelValues("dns://:53", "cluster.local.", "", "NXDOMAIN", "kubernetes"))
	if got != 4 || nx != 1 {
		t.Fatalf("coredns_dns_requests_total = %v (want 4), NXDOMAIN responses = %v (want 1)", got, nx)
	}
	for _, name := range []string{"coredns_dns_request_duration_seconds", "coredns_dns_request_size_bytes", "coredns_dns_response_size_bytes"} {
		if n := seriesCount(t, reg, name); n != 1 {
			t.Errorf("%s: %d series, want 1", name, n)
		}
	}
	// The four answers are packed once each: the response size histogram holds
	// exactly their lengths.
	var sum float64
	for _, q := range []string{"api-svc.demo.svc.cluster.local. A", "api-svc.demo.svc.cluster.local. A", "api-svc.demo.svc.cluster.local. A", "nope.demo.svc.cluster.local. A"} {
		sum += float64(h.Respond(context.Background(), query(t, q, 0), netip.Addr{}, true).Len())
	}
	if got := histogramSum(t, reg, "coredns_dns_response_size_bytes"); got != sum {
		t.Errorf("coredns_dns_response_size_bytes sum = %v, want %v", got, sum)
	}
}

func TestCacheIsBounded(t *testing.T) {
	var lines []string
	for i := range 50 {
		lines = append(lines, "h"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".example.com. 600 IN A 192.0.2.1")
	}
	up := newFakeUpstream(t, lines...)
	h := newTestHandler(t, NewFake(), Config{Upstreams: []string{up.addr}, CacheEntries: 10})
	for _, l := range lines {
		name, _, _ := strings.Cut(l, " ")
		ask(t, h, name+" A", "", true, 0)
	}
	if n := h.fwd.cache.len(); n > 10 {
		t.Fatalf("cache holds %d answers, bound 10", n)
	}
}

func TestUpstreamFailures(t *testing.T) {
	// A closed port: SERVFAIL, quickly; a second upstream that works is used instead.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	h := newTestHandler(t, NewFake(), Config{Upstreams: []string{dead}, ForwardTimeout: 300 * time.Millisecond})
	diff(t, "dead upstream", "SERVFAIL ra", ask(t, h, "api.example.com. A", "", true, 0))

	up := newFakeUpstream(t, "api.example.com. 60 IN A 192.0.2.10")
	h = newTestHandler(t, NewFake(), Config{Upstreams: []string{dead, up.addr}, ForwardTimeout: 300 * time.Millisecond})
	for range 2 {
		diff(t, "one dead upstream of two", "NOERROR ra\nANSWER\napi.example.com. 60 IN A 192.0.2.10",
			ask(t, h, "api.example.com. A", "", true, 0))
	}
	if _, err := NewHandler(Config{Zone: "cluster.local", Upstreams: []string{"8.8.8.8"}}, NewFake()); err == nil ||
		!strings.Contains(err.Error(), `upstream "8.8.8.8"`) {
		t.Fatalf("an upstream without port: %v", err)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

func seriesCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestConcurrentQuestionsShareOneExchange: a burst of the same question asks the
// upstream once.
func TestConcurrentQuestionsShareOneExchange(t *testing.T) {
	up := newFakeUpstream(t, "api.example.com. 60 IN A 192.0.2.10")
	up.delay.Store(int64(200 * time.Millisecond))
	h := newTestHandler(t, NewFake(), Config{Upstreams: []string{up.addr}})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.Respond(context.Background(), query(t, "api.example.com. A", 0), netip.Addr{}, true)
			if resp == nil || len(resp.Answer) != 1 {
				t.Errorf("answer: %v", resp)
			}
		}()
	}
	wg.Wait()
	if n := up.count("api.example.com. A"); n != 1 {
		t.Fatalf("upstream asked %d times for one burst, want 1", n)
	}
}

// TestUpstreamAnswerForAnotherQuestion: an upstream reply with the right id but
// another question (spoofed, or a confused server) is refused rather than cached and
// served to every pod.
func TestUpstreamAnswerForAnotherQuestion(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*dns.Msg)
		want string
	}{
		{"another name", func(m *dns.Msg) { m.Question[0].Name = "evil.example.com." }, "SERVFAIL ra"},
		{"another type", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA }, "SERVFAIL ra"},
		{"another class", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }, "SERVFAIL ra"},
		{"no question", func(m *dns.Msg) { m.Question = nil }, "SERVFAIL ra"},
		{"the same name in another case (0x20) is the same question", func(m *dns.Msg) { m.Question[0].Name = "API.example.COM." },
			"NOERROR ra\nANSWER\napi.example.com. 60 IN A 192.0.2.66"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
				m := new(dns.Msg)
				m.SetReply(r)
				rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 192.0.2.66")
				m.Answer = []dns.RR{rr}
				tc.mut(m)
				_ = w.WriteMsg(m)
			})}
			go func() { _ = srv.ActivateAndServe() }()
			t.Cleanup(func() { _ = srv.Shutdown() })
			h := newTestHandler(t, NewFake(), Config{Upstreams: []string{pc.LocalAddr().String()}, ForwardTimeout: 500 * time.Millisecond})
			diff(t, tc.name, tc.want, ask(t, h, "api.example.com. A", "", true, 0))
			if n, want := h.fwd.cache.len(), strings.Count(tc.want, "ANSWER"); n != want {
				t.Fatalf("%d answers cached, want %d", n, want)
			}
		})
	}
}

// TestCacheTTL: how long an upstream answer is kept: its smallest TTL, bounded a day
// for data and an hour for denials (RFC 2308: the negative TTL is the smaller of the
// SOA's TTL and MINIMUM); answers that say nothing of their lifetime, and failures,
// are not kept.
func TestCacheTTL(t *testing.T) {
	msg := func(rcode int, lines ...string) *dns.Msg {
		m := new(dns.Msg)
		m.Rcode = rcode
		for _, l := range lines {
			rr, err := dns.NewRR(l)
			if err != nil {
				t.Fatal(err)
			}
			if rr.Header().Rrtype == dns.TypeSOA {
				m.Ns = append(m.Ns, rr)
			} else {
				m.Answer = append(m.Answer, rr)
			}
		}
		return m
	}
	type verdict struct {
		TTL      time.Duration
		Negative bool
		Kept     bool
	}
	cases := []struct {
		name string
		m    *dns.Msg
		want verdict
	}{
		{"the smallest TTL of the answer", msg(dns.RcodeSuccess, "a.example. 300 IN CNAME b.example.", "b.example. 60 IN A 192.0.2.1"), verdict{60 * time.Second, false, true}},
		{"data kept a day at most", msg(dns.RcodeSuccess, "a.example. 604800 IN A 192.0.2.1"), verdict{24 * time.Hour, false, true}},
		{"TTL 0 is not kept", msg(dns.RcodeSuccess, "a.example. 0 IN A 192.0.2.1"), verdict{0, false, false}},
		{"NXDOMAIN: the SOA's MINIMUM when smaller", msg(dns.RcodeNameError, "example. 3600 IN SOA ns.example. h.example. 1 2 3 4 30"), verdict{30 * time.Second, true, true}},
		{"NXDOMAIN: the SOA's TTL when smaller", msg(dns.RcodeNameError, "example. 20 IN SOA ns.example. h.example. 1 2 3 4 300"), verdict{20 * time.Second, true, true}},
		{"NODATA like NXDOMAIN", msg(dns.RcodeSuccess, "example. 60 IN SOA ns.example. h.example. 1 2 3 4 60"), verdict{60 * time.Second, true, true}},
		{"denials kept an hour at most", msg(dns.RcodeNameError, "example. 86400 IN SOA ns.example. h.example. 1 2 3 4 86400"), verdict{time.Hour, true, true}},
		{"a denial without SOA is not kept", msg(dns.RcodeNameError), verdict{0, true, false}},
		{"SERVFAIL is not kept", msg(dns.RcodeServerFailure), verdict{0, false, false}},
		{"REFUSED is not kept", msg(dns.RcodeRefused), verdict{0, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got verdict
			got.TTL, got.Negative, got.Kept = cacheTTL(tc.m)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// histogramSum is the sum of the only series of histogram name in reg.
func histogramSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}
