package dns

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

const soaLine = "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"

// TestSpecification walks every record of the Kubernetes DNS-Based Service Discovery
// specification (schema 1.1.0) and the NXDOMAIN/NODATA rules around them.
func TestSpecification(t *testing.T) {
	h := newTestHandler(t, fakeCluster(t), Config{})
	cases := []struct {
		name, q, from, want string
	}{
		// 2.2 schema version.
		{"schema version", "dns-version.cluster.local. TXT", "", `
			NOERROR aa
			ANSWER
			dns-version.cluster.local. 5 IN TXT "1.1.0"`},
		{"schema version has no A", "dns-version.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		// 2.3.1 A/AAAA for a ClusterIP.
		{"clusterip A", "api-svc.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`},
		{"clusterip has no AAAA: NODATA with the SOA", "api-svc.demo.svc.cluster.local. AAAA", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"dual-stack A", "dual.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			dual.demo.svc.cluster.local. 5 IN A 10.96.0.21`},
		{"dual-stack AAAA", "dual.demo.svc.cluster.local. AAAA", "", `
			NOERROR aa
			ANSWER
			dual.demo.svc.cluster.local. 5 IN AAAA fd00:10:96::21`},
		{"case-insensitive, the question's case kept", "API-Svc.Demo.SVC.Cluster.Local. A", "", `
			NOERROR aa
			ANSWER
			API-Svc.Demo.SVC.Cluster.Local. 5 IN A 10.96.0.20`},
		{"seed 001 full name", "signalements.signalements.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			signalements.signalements.svc.cluster.local. 5 IN A 10.96.0.50`},
		{"clusterip ANY", "api-svc.demo.svc.cluster.local. ANY", "", `
			NOERROR aa
			ANSWER
			api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`},
		// 2.3.2 SRV for named ports.
		{"clusterip SRV", "_http._tcp.api-svc.demo.svc.cluster.local. SRV", "", `
			NOERROR aa
			ANSWER
			_http._tcp.api-svc.demo.svc.cluster.local. 5 IN SRV 0 100 80 api-svc.demo.svc.cluster.local.
			ADDITIONAL
			api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`},
		{"SRV name case kept", "_HTTP._TCP.api-svc.demo.svc.cluster.local. SRV", "", `
			NOERROR aa
			ANSWER
			_HTTP._TCP.api-svc.demo.svc.cluster.local. 5 IN SRV 0 100 80 api-svc.demo.svc.cluster.local.
			ADDITIONAL
			api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`},
		{"SRV of the wrong protocol", "_http._udp.api-svc.demo.svc.cluster.local. SRV", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"unnamed port has no SRV", "_9090._tcp.api-svc.demo.svc.cluster.local. SRV", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"the _proto level is an empty non-terminal", "_tcp.api-svc.demo.svc.cluster.local. SRV", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"SRV name asked for A: NODATA", "_http._tcp.api-svc.demo.svc.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"no endpoint names under a ClusterIP Service", "10-244-1-5.api-svc.demo.svc.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		// 2.3.3 PTR for a ClusterIP.
		{"PTR of a ClusterIP", "20.0.96.10.in-addr.arpa. PTR", "", `
			NOERROR aa
			ANSWER
			20.0.96.10.in-addr.arpa. 5 IN PTR api-svc.demo.svc.cluster.local.`},
		{"PTR of an IPv6 ClusterIP", "1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. PTR", "", `
			NOERROR aa
			ANSWER
			1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.demo.svc.cluster.local.`},
		{"unknown reverse name, no upstream", "99.0.96.10.in-addr.arpa. PTR", "", `
			REFUSED`},
		// 2.4.1 headless A per ready endpoint, and per hostname.
		{"headless A: ready endpoints only", "web.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			web.demo.svc.cluster.local. 5 IN A 10.244.1.10
			web.demo.svc.cluster.local. 5 IN A 10.244.2.11`},
		{"headless publishNotReadyAddresses", "peers.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			peers.demo.svc.cluster.local. 5 IN A 10.244.1.20
			peers.demo.svc.cluster.local. 5 IN A 10.244.2.21`},
		{"headless with no ready endpoint: NXDOMAIN", "nobody.demo.svc.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"StatefulSet pod by hostname", "web-0.web.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			web-0.web.demo.svc.cluster.local. 5 IN A 10.244.1.10`},
		{"a not-ready endpoint's name does not exist", "web-2.web.demo.svc.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"endpoint without hostname: dashed IP", "10-244-2-21.peers.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			10-244-2-21.peers.demo.svc.cluster.local. 5 IN A 10.244.2.21`},
		// 2.4.2 headless SRV per ready endpoint and port.
		{"headless SRV", "_http._tcp.web.demo.svc.cluster.local. SRV", "", `
			NOERROR aa
			ANSWER
			_http._tcp.web.demo.svc.cluster.local. 5 IN SRV 0 50 8080 web-0.web.demo.svc.cluster.local.
			_http._tcp.web.demo.svc.cluster.local. 5 IN SRV 0 50 8080 web-1.web.demo.svc.cluster.local.
			ADDITIONAL
			web-0.web.demo.svc.cluster.local. 5 IN A 10.244.1.10
			web-1.web.demo.svc.cluster.local. 5 IN A 10.244.2.11`},
		// 2.4.3 PTR for a headless endpoint.
		{"PTR of a headless endpoint", "10.1.244.10.in-addr.arpa. PTR", "", `
			NOERROR aa
			ANSWER
			10.1.244.10.in-addr.arpa. 5 IN PTR web-0.web.demo.svc.cluster.local.`},
		// 2.5 ExternalName.
		{"ExternalName CNAME (seed 003)", "bdd-externe.production.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			bdd-externe.production.svc.cluster.local. 5 IN CNAME ma-base-de-donnees.mon-fournisseur-cloud.com.`},
		{"ExternalName asked for CNAME", "bdd-externe.production.svc.cluster.local. CNAME", "", `
			NOERROR aa
			ANSWER
			bdd-externe.production.svc.cluster.local. 5 IN CNAME ma-base-de-donnees.mon-fournisseur-cloud.com.`},
		{"ExternalName into the zone is followed", "alias.demo.svc.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			alias.demo.svc.cluster.local. 5 IN CNAME api-svc.demo.svc.cluster.local.
			api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`},
		{"ExternalName into the zone, NODATA at the end", "alias.demo.svc.cluster.local. AAAA", "", `
			NOERROR aa
			ANSWER
			alias.demo.svc.cluster.local. 5 IN CNAME api-svc.demo.svc.cluster.local.
			AUTHORITY
			` + soaLine},
		// 2.6 pod records.
		{"pod A record", "10-244-1-9.demo.pod.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			10-244-1-9.demo.pod.cluster.local. 5 IN A 10.244.1.9`},
		{"pod A record in the wrong namespace", "10-244-1-9.default.pod.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"no pod at that address", "10-244-7-7.demo.pod.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"a pod record asked for AAAA: NODATA", "10-244-1-9.demo.pod.cluster.local. AAAA", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"nothing below a pod record", "x.10-244-1-9.demo.pod.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"a namespace under pod is an empty non-terminal", "demo.pod.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"an unknown namespace under pod", "nosuchns.pod.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"pod is an empty non-terminal", "pod.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		// NXDOMAIN versus NODATA.
		{"unknown Service", "nope.demo.svc.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"a namespace is an empty non-terminal", "demo.svc.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"an existing namespace without Services too", "empty.svc.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"unknown namespace", "nosuchns.svc.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"svc is an empty non-terminal", "svc.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"unknown name in the zone", "foo.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"short name from outside a namespace (seed 001)", "signalements.demo.svc.cluster.local. A", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		// The zone's SOA and NS.
		{"SOA", "cluster.local. SOA", "", `
			NOERROR aa
			ANSWER
			` + soaLine},
		{"NS", "cluster.local. NS", "", `
			NOERROR aa
			ANSWER
			cluster.local. 5 IN NS ns.dns.cluster.local.`},
		{"the name server's address", "ns.dns.cluster.local. A", "", `
			NOERROR aa
			ANSWER
			ns.dns.cluster.local. 5 IN A 10.96.0.10`},
		{"the name server has no AAAA: NODATA", "ns.dns.cluster.local. AAAA", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"dns is an empty non-terminal", "dns.cluster.local. A", "", `
			NOERROR aa
			AUTHORITY
			` + soaLine},
		{"nothing below dns-version", "x.dns-version.cluster.local. TXT", "", `
			NXDOMAIN aa
			AUTHORITY
			` + soaLine},
		{"the zone's SOA and NS for ANY", "Cluster.Local. ANY", "", `
			NOERROR aa
			ANSWER
			Cluster.Local. 5 IN NS ns.dns.cluster.local.
			Cluster.Local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5`},
		// Outside the zone with no upstream.
		{"other names are refused without upstream", "example.com. A", "", `
			REFUSED`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diff(t, tc.q, tc.want, ask(t, h, tc.q, tc.from, true, 0))
		})
	}
}

func TestServfailUntilSynced(t *testing.T) {
	f := fakeCluster(t)
	f.SetSynced(false)
	h := newTestHandler(t, f, Config{})
	diff(t, "before sync", "SERVFAIL", ask(t, h, "api-svc.demo.svc.cluster.local. A", "", true, 0))
	diff(t, "before sync, reverse", "SERVFAIL", ask(t, h, "20.0.96.10.in-addr.arpa. PTR", "", true, 0))
	f.SetSynced(true)
	diff(t, "after sync", `
		NOERROR aa
		ANSWER
		api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`, ask(t, h, "api-svc.demo.svc.cluster.local. A", "", true, 0))
}

func TestTTLAndZoneAreConfigurable(t *testing.T) {
	f := NewFake()
	if err := f.Add(makeNamespace("a"), makeService("a", "s", func(s *v1.Service) { s.Spec.ClusterIP = "10.0.0.7" })); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, f, Config{Zone: "Corp.Example.", TTL: 30})
	diff(t, "ttl 30", `
		NOERROR aa
		ANSWER
		s.a.svc.corp.example. 30 IN A 10.0.0.7`, ask(t, h, "s.a.svc.corp.example. A", "", true, 0))
	diff(t, "cluster.local is not ours then", "REFUSED", ask(t, h, "s.a.svc.cluster.local. A", "", true, 0))
}

// TestUpdatesAreSeen: the answers follow the cache (endpoint turns ready, Service goes).
func TestUpdatesAreSeen(t *testing.T) {
	f := fakeCluster(t)
	h := newTestHandler(t, f, Config{})
	q := "nobody.demo.svc.cluster.local. A"
	diff(t, q, "NXDOMAIN aa\nAUTHORITY\n"+soaLine, ask(t, h, q, "", true, 0))
	if err := f.Add(makeSlice("demo", "nobody", "nobody-a", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints = []discoveryv1.Endpoint{ep("10.244.1.30", true, "")}
	})); err != nil {
		t.Fatal(err)
	}
	diff(t, q, "NOERROR aa\nANSWER\nnobody.demo.svc.cluster.local. 5 IN A 10.244.1.30", ask(t, h, q, "", true, 0))
	if err := f.Delete(makeService("demo", "nobody", nil)); err != nil {
		t.Fatal(err)
	}
	diff(t, q, "NXDOMAIN aa\nAUTHORITY\n"+soaLine, ask(t, h, q, "", true, 0))
}

// TestTruncation: an answer too big for the client's UDP size is truncated with TC
// set; the same question over TCP gets everything.
func TestTruncation(t *testing.T) {
	f := fakeCluster(t)
	var eps []discoveryv1.Endpoint
	for i := range 100 {
		eps = append(eps, ep(fmt.Sprintf("10.244.9.%d", i+1), true, ""))
	}
	if err := f.Add(makeService("demo", "big", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone }),
		makeSlice("demo", "big", "big-a", func(s *discoveryv1.EndpointSlice) { s.Endpoints = eps })); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, f, Config{})
	q := "big.demo.svc.cluster.local. A"
	for _, tc := range []struct {
		name     string
		udp      bool
		size     uint16
		tc       bool
		maxBytes int
		answers  int
	}{
		{"udp without EDNS: 512 bytes", true, 0, true, 512, -1},
		{"udp with EDNS 1232", true, 1232, true, 1232, -1},
		{"udp with EDNS 4096 is capped at 1232", true, 4096, true, 1232, -1},
		{"tcp: the whole answer", false, 0, false, 65535, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := ask(t, h, q, "", tc.udp, tc.size)
			b, _ := resp.Pack()
			if resp.Truncated != tc.tc || len(b) > tc.maxBytes {
				t.Fatalf("tc=%v size=%d, want tc=%v size<=%d", resp.Truncated, len(b), tc.tc, tc.maxBytes)
			}
			if tc.answers >= 0 && len(resp.Answer) != tc.answers {
				t.Fatalf("%d answers, want %d", len(resp.Answer), tc.answers)
			}
		})
	}
}

// TestTruncationOverTCP: an answer larger than a DNS message can be (64 KiB) is cut
// to fit, with TC set, rather than failing to pack and leaving the client without
// any answer.
func TestTruncationOverTCP(t *testing.T) {
	f := fakeCluster(t)
	var eps []discoveryv1.Endpoint
	for i := range 5000 {
		eps = append(eps, ep(fmt.Sprintf("10.245.%d.%d", i/250, i%250+1), true, ""))
	}
	if err := f.Add(makeService("demo", "huge", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone }),
		makeSlice("demo", "huge", "huge-a", func(s *discoveryv1.EndpointSlice) { s.Endpoints = eps })); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, f, Config{})
	resp := ask(t, h, "huge.demo.svc.cluster.local. A", "", false, 0)
	b, err := resp.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || len(b) > 65535 || len(resp.Answer) < 4000 || len(resp.Answer) >= 5000 {
		t.Fatalf("tc=%v, %d bytes, %d of 5000 answers; want tc, at most 65535 bytes, most answers", resp.Truncated, len(b), len(resp.Answer))
	}
}
