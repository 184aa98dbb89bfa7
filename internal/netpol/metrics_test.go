package netpol

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/knftables"
)

// TestConnectionMetrics: the allowed metric adds up a policy's rule counters, the
// denied one is the pod's counter, read from the table at scrape time.
func TestConnectionMetrics(t *testing.T) {
	pods, nss := world()
	fake := newFake()
	reg := prometheus.NewRegistry()
	s := NewSyncer(fake, nil, reg)
	m := Compile(Snapshot{Policies: examplePolicies(), Pods: pods, Namespaces: nss, NodeName: "node-1"})
	if err := s.Sync(context.Background(), m, true, nil); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]uint64{"allow-in-x.allow-a-0": 3, "allow-in-x.allow-a-1": 4, "deny-in-x.a": 2} {
		c := fake.Table.Counters[name]
		if c == nil {
			t.Fatalf("no counter %s", name)
		}
		c.Packets, c.Bytes = knftables.PtrTo(n), knftables.PtrTo(60*n)
	}
	want := `
# HELP tranche_networkpolicy_allowed_connections_total New connections a NetworkPolicy rule allowed on this node (first packet only)
# TYPE tranche_networkpolicy_allowed_connections_total counter
tranche_networkpolicy_allowed_connections_total{direction="egress",namespace="x",policy="egress-dns"} 0
tranche_networkpolicy_allowed_connections_total{direction="ingress",namespace="x",policy="allow-a"} 7
# HELP tranche_networkpolicy_denied_connections_total New connections dropped on this node because no policy of an isolated pod allowed them
# TYPE tranche_networkpolicy_denied_connections_total counter
tranche_networkpolicy_denied_connections_total{direction="egress",namespace="x",pod="a"} 0
tranche_networkpolicy_denied_connections_total{direction="ingress",namespace="x",pod="a"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tranche_networkpolicy_allowed_connections_total", "tranche_networkpolicy_denied_connections_total"); err != nil {
		t.Error(err)
	}
}
