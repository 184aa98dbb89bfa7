package dns

import (
	"testing"
)

// TestSearchPathAcceleration: a pod's first search-expanded query gets the answer its
// resolver would reach at the end of the ndots:5 walk, as a CNAME from the asked name,
// so the walk stops at one query; anything uncertain is answered as before.
func TestSearchPathAcceleration(t *testing.T) {
	up := newFakeUpstream(t,
		"api.example.com. 60 IN A 192.0.2.10",
		"v4only.example.com. 60 IN A 192.0.2.12",
	)
	h := newTestHandler(t, fakeCluster(t), Config{Upstreams: []string{up.addr}})
	const client = "10.244.1.9" // pod demo/client, standard resolv.conf
	cases := []struct {
		name, q, from, want string
	}{
		{"external name, first query", "api.example.com.demo.svc.cluster.local. A", client, `
			NOERROR aa ra
			ANSWER
			api.example.com. 60 IN A 192.0.2.10
			api.example.com.demo.svc.cluster.local. 5 IN CNAME api.example.com.`},
		{"the question's case kept on the alias", "API.example.com.Demo.svc.cluster.local. A", client, `
			NOERROR aa ra
			ANSWER
			API.example.com.Demo.svc.cluster.local. 5 IN CNAME api.example.com.
			api.example.com. 60 IN A 192.0.2.10`},
		{"namespace-qualified Service from another namespace (seed 001)", "signalements.signalements.demo.svc.cluster.local. A", client, `
			NOERROR aa ra
			ANSWER
			signalements.signalements.demo.svc.cluster.local. 5 IN CNAME signalements.signalements.svc.cluster.local.
			signalements.signalements.svc.cluster.local. 5 IN A 10.96.0.50`},
		{"a Service of the pod's own namespace is answered as is", "api-svc.demo.svc.cluster.local. A", client, `
			NOERROR aa ra
			ANSWER
			api-svc.demo.svc.cluster.local. 5 IN A 10.96.0.20`},
		{"no data of that type anywhere: the walk goes on", "v4only.example.com.demo.svc.cluster.local. AAAA", client, `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaLine},
		{"unknown everywhere: NXDOMAIN", "nope.example.com.demo.svc.cluster.local. A", client, `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaLine},
		{"another namespace's search domain is not this pod's", "api.example.com.signalements.svc.cluster.local. A", client, `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaLine},
		{"a pod with its own dnsConfig walks its own way", "api.example.com.demo.svc.cluster.local. A", "10.244.1.8", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaLine},
		{"an address that is no pod", "api.example.com.demo.svc.cluster.local. A", "10.244.5.5", `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaLine},
		{"the second search domain is not rewritten", "api.example.com.svc.cluster.local. A", client, `
			NXDOMAIN aa ra
			AUTHORITY
			` + soaLine},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diff(t, tc.q, tc.want, ask(t, h, tc.q, tc.from, true, 0))
		})
	}
	h = newTestHandler(t, fakeCluster(t), Config{Upstreams: []string{up.addr}, NoAutopath: true})
	diff(t, "turned off", "NXDOMAIN aa ra\nAUTHORITY\n"+soaLine, ask(t, h, "api.example.com.demo.svc.cluster.local. A", client, true, 0))
}

// TestNdotsWalk counts the queries a stub resolver with seed 001's resolv.conf sends for
// an external name, A and AAAA, before and after acceleration: 8 then 2.
func TestNdotsWalk(t *testing.T) {
	up := newFakeUpstream(t, "api.example.com. 60 IN A 192.0.2.10", "api.example.com. 60 IN AAAA 2001:db8::10")
	search := []string{"demo.svc.cluster.local.", "svc.cluster.local.", "cluster.local.", ""}
	walk := func(h *Handler) int {
		sent := 0
		for _, qt := range []string{"A", "AAAA"} {
			for _, s := range search {
				sent++
				resp := ask(t, h, "api.example.com."+s+" "+qt, "10.244.1.9", true, 0)
				if resp.Rcode == 0 && len(resp.Answer) > 0 {
					break
				}
			}
		}
		return sent
	}
	before := walk(newTestHandler(t, fakeCluster(t), Config{Upstreams: []string{up.addr}, NoAutopath: true}))
	after := walk(newTestHandler(t, fakeCluster(t), Config{Upstreams: []string{up.addr}}))
	t.Logf("queries for api.example.com with ndots:5: %d without acceleration, %d with", before, after)
	if before != 8 || after != 2 {
		t.Fatalf("queries: %d before, %d after; want 8 and 2", before, after)
	}
}
