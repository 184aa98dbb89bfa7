package dns

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// rev is the reverse name of an address, with a query type: "<name> TYPE".
func rev(t testing.TB, addr, qtype string) string {
	t.Helper()
	name, err := dns.ReverseAddr(addr)
	if err != nil {
		t.Fatalf("reverse name of %s: %v", addr, err)
	}
	return name + " " + qtype
}

// revZone is the name of the reverse zone of addr/bits (bits on a label boundary),
// written by cutting labels off addr's reverse name rather than by our own code.
func revZone(t testing.TB, addr string, bits int) string {
	t.Helper()
	name, err := dns.ReverseAddr(addr)
	if err != nil {
		t.Fatalf("reverse name of %s: %v", addr, err)
	}
	cut := (32 - bits) / 8
	if strings.Contains(addr, ":") {
		cut = (128 - bits) / 4
	}
	return strings.Join(strings.Split(name, ".")[cut:], ".")
}

// soaOf is the SOA line of the reverse zone at apex.
func soaOf(apex string) string {
	return apex + " 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"
}

// TestReverseZones: the reverse zones of the service and pod CIDRs are answered here,
// NXDOMAIN for addresses nobody holds, and never reach the upstream; reverse names of
// other addresses still do.
func TestReverseZones(t *testing.T) {
	up := newFakeUpstream(t)
	h := newTestHandler(t, fakeCluster(t), Config{Upstreams: []string{up.addr}, ReverseCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:96::/110"),
	}})
	// fd00:10:96::/110 rounds up to the four /112 zones of fd00:10:96::0:0 to fd00:10:96::3:0.
	v6Zone := func(n string) string { return revZone(t, "fd00:10:96::"+n+":0", 112) }
	cases := []struct {
		name, q, want string
		upstream      bool // the question reaches the upstream
	}{
		{"PTR of a ClusterIP", "20.0.96.10.in-addr.arpa. PTR", `
			NOERROR aa ra
			ANSWER
			20.0.96.10.in-addr.arpa. 5 IN PTR api-svc.demo.svc.cluster.local.`, false},
		{"the question's case kept", "20.0.96.10.IN-ADDR.Arpa. PTR", `
			NOERROR aa ra
			ANSWER
			20.0.96.10.IN-ADDR.Arpa. 5 IN PTR api-svc.demo.svc.cluster.local.`, false},
		{"a free ClusterIP is NXDOMAIN with its zone's SOA", "99.0.96.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"a /12 is sixteen /16 zones: the last", "254.255.111.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("111.10.in-addr.arpa."), false},
		{"the address after the service CIDR goes upstream", "1.0.112.10.in-addr.arpa. PTR", `
			NXDOMAIN ra
			AUTHORITY
			` + upstreamSOA, true},
		{"the address before it too", "255.255.95.10.in-addr.arpa. PTR", `
			NXDOMAIN ra
			AUTHORITY
			` + upstreamSOA, true},
		{"PTR of a headless endpoint in the pod CIDR", "10.1.244.10.in-addr.arpa. PTR", `
			NOERROR aa ra
			ANSWER
			10.1.244.10.in-addr.arpa. 5 IN PTR web-0.web.demo.svc.cluster.local.`, false},
		{"a pod that is no headless endpoint has no PTR", "9.1.244.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("244.10.in-addr.arpa."), false},
		{"a free pod address", "7.7.244.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("244.10.in-addr.arpa."), false},
		{"a not-ready endpoint has no PTR", "12.3.244.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("244.10.in-addr.arpa."), false},
		{"a PTR name asked for A: NODATA", "20.0.96.10.in-addr.arpa. A", `
			NOERROR aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"a free address asked for A: NXDOMAIN", "99.0.96.10.in-addr.arpa. A", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"a PTR name asked for ANY", "20.0.96.10.in-addr.arpa. ANY", `
			NOERROR aa ra
			ANSWER
			20.0.96.10.in-addr.arpa. 5 IN PTR api-svc.demo.svc.cluster.local.`, false},
		// The zones' apexes.
		{"SOA at the apex", "96.10.in-addr.arpa. SOA", `
			NOERROR aa ra
			ANSWER
			` + soaOf("96.10.in-addr.arpa."), false},
		{"NS at the apex", "244.10.in-addr.arpa. NS", `
			NOERROR aa ra
			ANSWER
			244.10.in-addr.arpa. 5 IN NS ns.dns.cluster.local.`, false},
		{"the apex's case kept", "244.10.IN-ADDR.ARPA. NS", `
			NOERROR aa ra
			ANSWER
			244.10.IN-ADDR.ARPA. 5 IN NS ns.dns.cluster.local.`, false},
		{"ANY at the apex", "100.10.in-addr.arpa. ANY", `
			NOERROR aa ra
			ANSWER
			100.10.in-addr.arpa. 5 IN NS ns.dns.cluster.local.
			` + soaOf("100.10.in-addr.arpa."), false},
		{"the apex has no PTR: NODATA", "96.10.in-addr.arpa. PTR", `
			NOERROR aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"above the zones is the upstreams'", "10.in-addr.arpa. NS", `
			NXDOMAIN ra
			AUTHORITY
			` + upstreamSOA, true},
		// Names below the apex that are not addresses.
		{"between the apex and an address: an empty non-terminal", "0.96.10.in-addr.arpa. PTR", `
			NOERROR aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"a label that is not a number", "www.0.96.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"a leading zero is not the same label", "020.0.96.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"a label below a full address", "1.20.0.96.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		{"an octet above 255", "256.0.96.10.in-addr.arpa. PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf("96.10.in-addr.arpa."), false},
		// IPv6: nibble zones.
		{"PTR of an IPv6 ClusterIP", rev(t, "fd00:10:96::21", "PTR"), `
			NOERROR aa ra
			ANSWER
			` + strings.TrimSuffix(rev(t, "fd00:10:96::21", "PTR"), " PTR") + ` 5 IN PTR dual.demo.svc.cluster.local.`, false},
		{"a free IPv6 address in the last /112 of a /110", rev(t, "fd00:10:96::3:5", "PTR"), `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf(v6Zone("3")), false},
		{"NS at an IPv6 apex", v6Zone("0") + " NS", `
			NOERROR aa ra
			ANSWER
			` + v6Zone("0") + ` 5 IN NS ns.dns.cluster.local.`, false},
		{"the IPv6 address after the /110 goes upstream", rev(t, "fd00:10:96::4:5", "PTR"), `
			NXDOMAIN ra
			AUTHORITY
			` + upstreamSOA, true},
		{"a hex digit pair is not a nibble label", "ab." + v6Zone("0") + " PTR", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaOf(v6Zone("0")), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := up.total.Load()
			diff(t, tc.q, tc.want, ask(t, h, tc.q, "10.244.1.9", true, 0))
			if asked := up.total.Load() > before; asked != tc.upstream {
				t.Errorf("%s: upstream asked = %v, want %v", tc.q, asked, tc.upstream)
			}
		})
	}
}

// TestReverseZonesBeforeSync: the reverse zones are the cluster's data too, so
// SERVFAIL until the caches are complete, as for the cluster zone.
func TestReverseZonesBeforeSync(t *testing.T) {
	f := fakeCluster(t)
	f.SetSynced(false)
	h := newTestHandler(t, f, Config{ReverseCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}})
	diff(t, "free ClusterIP before sync", "SERVFAIL", ask(t, h, "99.0.96.10.in-addr.arpa. PTR", "", true, 0))
	f.SetSynced(true)
	diff(t, "free ClusterIP after sync", "NXDOMAIN aa\nAUTHORITY\n"+soaOf("96.10.in-addr.arpa."), ask(t, h, "99.0.96.10.in-addr.arpa. PTR", "", true, 0))
}

func TestReverseZoneApexes(t *testing.T) {
	cases := []struct {
		name  string
		cidrs []string
		q     string
		apex  string // "" when no zone covers q
	}{
		{"octet-aligned", []string{"10.244.0.0/16"}, "1.2.244.10.in-addr.arpa.", "244.10.in-addr.arpa."},
		{"rounded up to the next octet", []string{"10.96.0.0/12"}, "1.2.100.10.in-addr.arpa.", "100.10.in-addr.arpa."},
		{"a /24", []string{"192.168.7.0/24"}, "9.7.168.192.in-addr.arpa.", "7.168.192.in-addr.arpa."},
		{"a /28 is a zone of one /32 per address", []string{"192.168.7.16/28"}, "17.7.168.192.in-addr.arpa.", "17.7.168.192.in-addr.arpa."},
		{"outside a /28", []string{"192.168.7.16/28"}, "32.7.168.192.in-addr.arpa.", ""},
		{"above the apex", []string{"10.96.0.0/12"}, "10.in-addr.arpa.", ""},
		{"the largest zone wins over an overlapping one", []string{"10.244.1.0/24", "10.244.0.0/16"}, "5.1.244.10.in-addr.arpa.", "244.10.in-addr.arpa."},
		{"families do not mix", []string{"10.96.0.0/12"}, "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.0.a.ip6.arpa.", ""},
		{"IPv6 on a nibble", []string{"fd00:10:96::/108"}, "1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.",
			revZone(t, "fd00:10:96::", 108)},
		{"IPv6 rounded up to a nibble", []string{"fd00::/7"}, "f.ip6.arpa.", ""},
		{"IPv6 rounded up, one of two zones", []string{"fc00::/7"}, "1.d.f.ip6.arpa.", "d.f.ip6.arpa."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ps []netip.Prefix
			for _, c := range tc.cidrs {
				ps = append(ps, netip.MustParsePrefix(c))
			}
			z, err := newReverseZones(ps)
			if err != nil {
				t.Fatal(err)
			}
			r, ok := parseReverse(tc.q)
			if !ok {
				t.Fatalf("%s: not a reverse name", tc.q)
			}
			got := ""
			if apex, ok := z.apex(r); ok {
				got = apexName(apex)
			}
			if d := cmp.Diff(tc.apex, got); d != "" {
				t.Errorf("apex of %s in %v (-want +got):\n%s", tc.q, tc.cidrs, d)
			}
		})
	}
	if _, err := newReverseZones([]netip.Prefix{netip.MustParsePrefix("::ffff:10.96.0.0/108")}); err == nil {
		t.Error("an IPv4-mapped CIDR was accepted")
	}
}

// FuzzReverseName: any lowercase name reads as an address prefix or not at all, without a
// panic; a full address reads back as the name it came from, and a zone covering the
// name is a suffix of it.
func FuzzReverseName(f *testing.F) {
	for _, s := range []string{"20.0.96.10.in-addr.arpa.", "in-addr.arpa.", "96.10.in-addr.arpa.", "x.1.2.3.4.in-addr.arpa.",
		"1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", "ip6.arpa.", "a.b.ip6.arpa.", "..in-addr.arpa.", "arpa."} {
		f.Add(s)
	}
	z, err := newReverseZones([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:10:96::/110")})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		name = strings.ToLower(name) // the handler's contract: names are lowercased first
		r, ok := parseReverse(name)
		if !ok {
			return
		}
		if r.full() {
			back, err := dns.ReverseAddr(r.addr.String())
			if err != nil || back != name {
				t.Fatalf("%q reads as %s, whose reverse name is %q", name, r.addr, back)
			}
		}
		if apex, ok := z.apex(r); ok && !strings.HasSuffix(name, apexName(apex)) {
			t.Fatalf("%q is in the zone %s", name, apexName(apex))
		}
	})
}
