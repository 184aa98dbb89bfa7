package dns

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestBadInput: malformed or unsupported requests get the rcode RFC 1035/6891 give
// them, never a crash and never an answer to a response.
func TestBadInput(t *testing.T) {
	h := newTestHandler(t, fakeCluster(t), Config{})
	base := func() *dns.Msg { return query(t, "api-svc.demo.svc.cluster.local. A", 0) }
	cases := []struct {
		name  string
		mut   func(*dns.Msg)
		rcode int // -1: no answer
	}{
		{"update opcode", func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }, dns.RcodeNotImplemented},
		{"status opcode", func(m *dns.Msg) { m.Opcode = dns.OpcodeStatus }, dns.RcodeNotImplemented},
		{"no question", func(m *dns.Msg) { m.Question = nil }, dns.RcodeFormatError},
		{"two questions", func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }, dns.RcodeFormatError},
		{"records in the answer section", func(m *dns.Msg) {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "x.", Rrtype: dns.TypeA, Class: dns.ClassINET}}}
		}, dns.RcodeFormatError},
		{"two OPT records", func(m *dns.Msg) { m.SetEdns0(1232, false); m.Extra = append(m.Extra, m.Extra[0]) }, dns.RcodeFormatError},
		{"EDNS version 1", func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }, dns.RcodeBadVers},
		{"CHAOS class", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }, dns.RcodeRefused},
		{"ANY class", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassANY }, dns.RcodeRefused},
		{"zone transfer", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAXFR }, dns.RcodeRefused},
		{"incremental transfer", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeIXFR }, dns.RcodeRefused},
		{"OPT as a question", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeOPT }, dns.RcodeFormatError},
		{"meta type", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeTSIG }, dns.RcodeNotImplemented},
		{"type 0", func(m *dns.Msg) { m.Question[0].Qtype = 0 }, dns.RcodeNotImplemented},
		{"unknown data type: NODATA", func(m *dns.Msg) { m.Question[0].Qtype = 65280 }, dns.RcodeSuccess},
		{"a response is not answered", func(m *dns.Msg) { m.Response = true }, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := base()
			tc.mut(req)
			resp := h.Respond(context.Background(), req, netip.Addr{}, true)
			if tc.rcode < 0 {
				if resp != nil {
					t.Fatalf("answered a response: %v", resp)
				}
				return
			}
			if resp == nil {
				t.Fatal("no answer")
			}
			if resp.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", rcodeLabel(resp.Rcode), rcodeLabel(tc.rcode))
			}
			if resp.Id != req.Id || !resp.Response {
				t.Fatalf("id %d response=%v, want id %d response", resp.Id, resp.Response, req.Id)
			}
			if _, err := resp.Pack(); err != nil {
				t.Fatalf("answer does not pack: %v", err)
			}
		})
	}
}

// TestWire drives the handler through a miekg/dns server on loopback, over UDP and
// TCP, with messages the library would not build: garbage and a truncated header.
func TestWire(t *testing.T) {
	h := newTestHandler(t, fakeCluster(t), Config{})
	udpAddr, tcpAddr := serve(t, h)
	for _, proto := range []string{"udp", "tcp"} {
		addr := udpAddr
		if proto == "tcp" {
			addr = tcpAddr
		}
		c := &dns.Client{Net: proto}
		resp, _, err := c.Exchange(query(t, "Signalements.signalements.svc.cluster.local. A", 0), addr)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		diff(t, proto, `
			NOERROR aa
			ANSWER
			Signalements.signalements.svc.cluster.local. 5 IN A 10.96.0.50`, resp)
	}
	// A header claiming two questions: the library's accept function turns it into
	// FORMERR before our handler; garbage after a valid header likewise.
	m := query(t, "a.cluster.local. A", 0)
	b, _ := m.Pack()
	b[5] = 2
	conn, err := dnsConn(udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	noQuestion := append([]byte{}, b[:12]...)
	noQuestion[5] = 0
	// A name of 320 octets, over the 255 RFC 1035 allows: five labels of 63 letters.
	long := append([]byte{}, b[:12]...)
	long[5] = 1
	for range 5 {
		long = append(append(long, 63), strings.Repeat("a", 63)...)
	}
	long = append(long, 0, 0, 1, 0, 1)
	iquery := append([]byte{}, b...)
	iquery[5] = 1
	iquery[2] |= 1 << 3 // opcode 1, IQUERY (obsolete)
	for _, tc := range []struct {
		name  string
		raw   []byte
		rcode int
	}{
		{"two questions", b, dns.RcodeFormatError},
		{"garbage after the header", append(b[:12:12], 0xff, 0xff, 0xff), dns.RcodeFormatError},
		{"no question", noQuestion, dns.RcodeFormatError},
		{"a name over 255 octets", long, dns.RcodeFormatError},
		{"an obsolete opcode", iquery, dns.RcodeNotImplemented},
	} {
		if _, err := conn.Write(tc.raw); err != nil {
			t.Fatal(err)
		}
		got, err := conn.ReadMsg()
		if err != nil {
			t.Fatalf("%s: no answer to malformed input: %v", tc.name, err)
		}
		if got.Rcode != tc.rcode {
			t.Fatalf("%s: rcode %s, want %s", tc.name, rcodeLabel(got.Rcode), rcodeLabel(tc.rcode))
		}
	}
}

// FuzzRespond feeds arbitrary bytes through the message path the server runs: parse,
// validate, answer, truncate, pack. Nothing may panic and every answer must pack with
// the request's id. `go test -fuzz FuzzRespond ./internal/dns/` explores further; the
// seeds run with the unit tests.
func FuzzRespond(f *testing.F) {
	for _, q := range []string{
		"api-svc.demo.svc.cluster.local. A", "_http._tcp.web.demo.svc.cluster.local. SRV",
		"10.1.244.10.in-addr.arpa. PTR", "alias.demo.svc.cluster.local. ANY",
		"api.example.com.demo.svc.cluster.local. AAAA", "cluster.local. SOA", "web.demo.svc.cluster.local. A",
		"99.0.96.10.in-addr.arpa. PTR", "96.10.in-addr.arpa. ANY", "x.0.96.10.in-addr.arpa. PTR",
		"1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. PTR",
	} {
		m := query(f, q, 1232)
		b, _ := m.Pack()
		f.Add(b, true)
		f.Add(b, false)
	}
	long := query(f, strings.Repeat("a.", 120)+"cluster.local. A", 0)
	b, _ := long.Pack()
	f.Add(b, true)
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, true)
	f.Add([]byte{}, true)
	h := newTestHandler(f, fakeCluster(f), Config{ReverseCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:96::/110")}})
	f.Fuzz(func(t *testing.T, raw []byte, udp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(raw); err != nil {
			return // the server answers FORMERR itself (TestWire)
		}
		resp := h.Respond(context.Background(), req, netip.MustParseAddr("10.244.1.9"), udp)
		if resp == nil {
			if !req.Response {
				t.Fatal("no answer to a query")
			}
			return
		}
		out, err := resp.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, resp)
		}
		if resp.Id != req.Id {
			t.Fatalf("answer id %d, asked %d", resp.Id, req.Id)
		}
		if udp && len(out) > 1232 {
			t.Fatalf("UDP answer of %d bytes", len(out))
		}
	})
}
