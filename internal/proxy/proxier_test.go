package proxy

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/proxy/tracer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const testNode = "node-a"

var nodeIP = netip.MustParseAddr("10.240.0.2")

func makeService(ns, name, clusterIP string, mutate func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: clusterIP,
			Ports:     []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

type ep struct {
	ip                          string
	ready, serving, terminating bool
	node, zone                  string
	zoneHints, nodeHints        []string
}

func makeSlice(ns, svc, name string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		de := discoveryv1.Endpoint{
			Addresses: []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating),
			},
		}
		if e.node != "" {
			de.NodeName = ptr.To(e.node)
		}
		if e.zone != "" {
			de.Zone = ptr.To(e.zone)
		}
		if e.zoneHints != nil || e.nodeHints != nil {
			de.Hints = &discoveryv1.EndpointHints{}
			for _, z := range e.zoneHints {
				de.Hints.ForZones = append(de.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
			for _, n := range e.nodeHints {
				de.Hints.ForNodes = append(de.Hints.ForNodes, discoveryv1.ForNode{Name: n})
			}
		}
		s.Endpoints = append(s.Endpoints, de)
	}
	return s
}

func port(name string, p int32, proto v1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(p), Protocol: ptr.To(proto)}
}

func ready(ip, node string) ep { return ep{ip: ip, ready: true, serving: true, node: node} }

var httpPorts = []discoveryv1.EndpointPort{port("http", 8080, v1.ProtocolTCP)}

func newTestProxier(t testing.TB) (*Proxier, *knftables.Fake) {
	t.Helper()
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	cfg := DefaultConfig(testNode)
	cfg.Zone = "zone-a"
	cfg.NodeIP = nodeIP
	p, err := NewProxier(fake, ProxierConfig{Config: cfg, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func mustSync(t testing.TB, p *Proxier) {
	t.Helper()
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type traceCase struct {
	pkt  tracer.Packet
	want string
}

func pkt(src, dst, proto string, dport uint16) tracer.Packet {
	return tracer.Packet{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: proto, DPort: dport}
}

func trace(t *testing.T, fake *knftables.Fake, p tracer.Packet) string {
	t.Helper()
	tr, err := tracer.New(fake, nodeIP)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.Trace(p)
	if err != nil {
		t.Fatalf("tracing %+v: %v", p, err)
	}
	s := make([]string, len(out))
	for i, o := range out {
		s[i] = o.String()
	}
	return strings.Join(s, " | ")
}

// TestRules loads representative services, compares the table with a golden dump and
// traces packets through it.
func TestRules(t *testing.T) {
	const ns = "demo"
	tests := []modeCase{
		{
			name: "clusterip-tcp-udp",
			svcs: []*v1.Service{makeService(ns, "dns", "10.96.0.10", func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}}
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "dns", "dns-1",
				[]discoveryv1.EndpointPort{port("dns", 5353, v1.ProtocolUDP), port("dns-tcp", 5353, v1.ProtocolTCP)},
				ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))},
			traces: []traceCase{
				// A pod of this node keeps its address, whether the endpoint is on this
				// node (routed through it, so the reply is un-DNATed here) or another.
				{pkt("10.244.1.9", "10.96.0.10", "udp", 53), "accept dnat 10.244.1.2:5353 | accept dnat 10.244.2.2:5353"},
				{pkt("10.244.1.9", "10.96.0.10", "tcp", 53), "accept dnat 10.244.1.2:5353 | accept dnat 10.244.2.2:5353"},
				{pkt("10.240.0.9", "10.96.0.10", "tcp", 53), "accept dnat 10.244.1.2:5353 masquerade | accept dnat 10.244.2.2:5353 masquerade"},
				// Hairpin: the endpoint reaching itself is masqueraded (a reply from
				// itself to itself would never leave it to be un-DNATed).
				{pkt("10.244.1.2", "10.96.0.10", "udp", 53), "accept dnat 10.244.1.2:5353 masquerade | accept dnat 10.244.2.2:5353"},
				{pkt("10.244.3.9", "10.96.0.10", "udp", 53), "accept dnat 10.244.1.2:5353 | accept dnat 10.244.2.2:5353"},
				{pkt("10.244.1.9", "10.96.0.10", "tcp", 80), "reject tcp-reset"},
				{pkt("10.244.1.9", "10.96.0.10", "icmp", 0), "drop"},
				{pkt("10.244.1.9", "10.96.0.99", "tcp", 53), "drop"},
			},
		},
		sharedCase(ns, "nodeport"),
		sharedCase(ns, "loadbalancer-source-ranges"),
		sharedCase(ns, "loadbalancer-source-ranges-node"),
		sharedCase(ns, "session-affinity"),
		{
			name: "local-policies",
			svcs: []*v1.Service{makeService(ns, "loc", "10.96.0.50", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30050
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			}), makeService(ns, "itp", "10.96.0.51", func(s *v1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			}), makeService(ns, "remote-only", "10.96.0.52", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30052
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			})},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice(ns, "loc", "loc-1", httpPorts, ready("10.244.1.3", testNode), ready("10.244.2.3", "node-b")),
				makeSlice(ns, "itp", "itp-1", httpPorts, ready("10.244.1.4", testNode), ready("10.244.2.4", "node-b")),
				makeSlice(ns, "remote-only", "ro-1", httpPorts, ready("10.244.2.6", "node-b")),
			},
			traces: []traceCase{
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30050), "accept dnat 10.244.1.3:8080"},
				{pkt("10.244.1.9", "10.240.0.2", "tcp", 30050), "accept dnat 10.244.1.3:8080 | accept dnat 10.244.2.3:8080"},
				{pkt("10.244.1.9", "10.96.0.51", "tcp", 80), "accept dnat 10.244.1.4:8080"},
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30052), "drop"},
				{pkt("10.244.1.9", "10.96.0.52", "tcp", 80), "accept dnat 10.244.2.6:8080"},
			},
		},
		{
			name: "terminating-and-none",
			svcs: []*v1.Service{makeService(ns, "draining", "10.96.0.60", nil), makeService(ns, "empty", "10.96.0.61", nil)},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "draining", "d-1", httpPorts,
				ep{ip: "10.244.1.8", serving: true, terminating: true, node: testNode},
				ep{ip: "10.244.2.8", serving: false, terminating: true, node: "node-b"})},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.60", "tcp", 80), "accept dnat 10.244.1.8:8080"},
				{pkt("10.244.1.9", "10.96.0.61", "tcp", 80), "reject tcp-reset"},
				{pkt("10.244.1.9", "10.96.0.61", "udp", 80), "reject"},
			},
		},
		{
			name: "topology-hints",
			svcs: []*v1.Service{makeService(ns, "zonal", "10.96.0.70", func(s *v1.Service) {
				s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferSameZone)
			}), makeService(ns, "nodal", "10.96.0.71", func(s *v1.Service) {
				s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferSameNode)
			})},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice(ns, "zonal", "z-1", httpPorts,
					ep{ip: "10.244.1.10", ready: true, serving: true, node: testNode, zoneHints: []string{"zone-a"}},
					ep{ip: "10.244.2.10", ready: true, serving: true, node: "node-b", zoneHints: []string{"zone-a"}},
					ep{ip: "10.244.3.10", ready: true, serving: true, node: "node-c", zoneHints: []string{"zone-b"}}),
				makeSlice(ns, "nodal", "n-1", httpPorts,
					ep{ip: "10.244.1.11", ready: true, serving: true, node: testNode, zoneHints: []string{"zone-a"}, nodeHints: []string{testNode}},
					ep{ip: "10.244.2.11", ready: true, serving: true, node: "node-b", zoneHints: []string{"zone-a"}, nodeHints: []string{"node-b"}}),
			},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.70", "tcp", 80), "accept dnat 10.244.1.10:8080 | accept dnat 10.244.2.10:8080"},
				{pkt("10.244.1.9", "10.96.0.71", "tcp", 80), "accept dnat 10.244.1.11:8080"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fake := newTestProxier(t)
			for _, s := range tc.svcs {
				p.OnServiceAdd(s)
			}
			for _, s := range tc.slices {
				p.OnEndpointSliceAdd(s)
			}
			mustSync(t, p)
			golden(t, tc.name, fake.Dump())
			for _, c := range tc.traces {
				if got := trace(t, fake, c.pkt); got != c.want {
					t.Errorf("trace %v -> %v:%d/%s:\n got %s\nwant %s", c.pkt.Src, c.pkt.Dst, c.pkt.DPort, c.pkt.Proto, got, c.want)
				}
			}
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("table differs from %s (-want +got):\n%s", path, d)
	}
}

// TestPartialSync checks that a sync after one endpoint change writes only that
// service's objects, that a removed service's chains are flushed then deleted a sync
// later, and that no-op events cause no writes.
func TestPartialSync(t *testing.T) {
	p, fake := newTestProxier(t)
	sticky := func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }
	for i := range 3 {
		name := fmt.Sprintf("svc-%d", i)
		var mutate func(*v1.Service)
		if i == 2 {
			mutate = sticky // a service with chains of its own
		}
		p.OnServiceAdd(makeService("ns", name, fmt.Sprintf("10.96.1.%d", i+1), mutate))
		p.OnEndpointSliceAdd(makeSlice("ns", name, name+"-1", httpPorts, ready(fmt.Sprintf("10.244.1.%d", i+1), testNode)))
	}
	mustSync(t, p)

	old := makeSlice("ns", "svc-1", "svc-1-1", httpPorts, ready("10.244.1.2", testNode))
	cur := makeSlice("ns", "svc-1", "svc-1-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	cur.Annotations = map[string]string{AnnotationLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}
	p.OnEndpointSliceUpdate(old, cur)
	mustSync(t, p)
	txt := fake.LastTransaction.String()
	if strings.Contains(txt, "10.96.1.1 ") || strings.Contains(txt, "svc-2") || strings.Contains(txt, "10.96.1.3 ") || !strings.Contains(txt, "10.96.1.2 ") {
		t.Errorf("partial sync touched other services or missed svc-1:\n%s", txt)
	}
	if got := trace(t, fake, pkt("10.244.1.9", "10.96.1.2", "tcp", 80)); got != "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080" {
		t.Errorf("after update: %s", got)
	}

	p.OnEndpointSliceUpdate(cur, cur)
	mustSync(t, p)
	if n := fake.LastTransaction.NumOperations(); n != 0 {
		t.Errorf("no-op event wrote %d operations:\n%s", n, fake.LastTransaction)
	}

	p.OnServiceDelete(makeService("ns", "svc-2", "10.96.1.3", sticky))
	mustSync(t, p)
	chain := clusterChainName(ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "svc-2"}, Port: "http", Protocol: v1.ProtocolTCP})
	if fake.Table.Chains[chain] == nil || len(fake.Table.Chains[chain].Rules) != 0 {
		t.Errorf("deleted service's chain should be flushed but kept for one sync")
	}
	if got := trace(t, fake, pkt("10.244.1.9", "10.96.1.3", "tcp", 80)); got != "drop" {
		t.Errorf("deleted service: %s", got)
	}
	mustSync(t, p)
	if fake.Table.Chains[chain] != nil {
		t.Errorf("stale chain %s not deleted by the next sync", chain)
	}
	if strings.Contains(fake.Dump(), "svc-2") {
		t.Errorf("leftovers of svc-2:\n%s", fake.Dump())
	}
}

// TestFullSyncAfterFailure checks that a failed transaction makes the next sync full,
// and that a full sync removes objects it does not know about.
func TestFullSyncAfterFailure(t *testing.T) {
	p, fake := newTestProxier(t)
	p.OnServiceAdd(makeService("ns", "a", "10.96.1.1", nil))
	p.OnEndpointSliceAdd(makeSlice("ns", "a", "a-1", httpPorts, ready("10.244.1.1", testNode)))
	mustSync(t, p)
	want := fake.Dump()

	tx := fake.NewTransaction()
	tx.Add(&knftables.Chain{Name: "svc-leftover"})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	// Someone removed a map behind the proxy's back: the next partial sync fails.
	delete(fake.Table.Sets, hairpinSet)
	p.OnEndpointSliceUpdate(nil, makeSlice("ns", "a", "a-1", httpPorts, ready("10.244.1.5", testNode)))
	if err := p.Sync(context.Background()); err == nil {
		t.Fatal("sync over a corrupted table succeeded")
	}
	p.OnEndpointSliceUpdate(nil, makeSlice("ns", "a", "a-1", httpPorts, ready("10.244.1.1", testNode)))
	mustSync(t, p)
	mustSync(t, p) // deletes the leftover chain flushed by the full sync
	if d := cmp.Diff(want, fake.Dump()); d != "" {
		t.Errorf("full sync did not restore the table (-want +got):\n%s", d)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// BenchmarkSync generates and applies (to the fake) a full sync of N services with 10
// endpoints each, then a partial sync after one endpoint change.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("full/services=%d", n), func(b *testing.B) {
			for b.Loop() {
				p, _ := newTestProxier(b)
				loadServices(p, n)
				mustSync(b, p)
			}
		})
		b.Run(fmt.Sprintf("partial/services=%d", n), func(b *testing.B) {
			p, _ := newTestProxier(b)
			loadServices(p, n)
			mustSync(b, p)
			i := 0
			for b.Loop() {
				i++
				p.OnEndpointSliceUpdate(nil, benchSlice(0, i%2))
				mustSync(b, p)
			}
		})
	}
}

func loadServices(p *Proxier, n int) {
	for i := range n {
		p.OnServiceAdd(makeService("bench", fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250), nil))
		p.OnEndpointSliceAdd(benchSlice(i, 0))
	}
}

func benchSlice(i, variant int) *discoveryv1.EndpointSlice {
	eps := make([]ep, 10-variant)
	for j := range eps {
		eps[j] = ready(fmt.Sprintf("10.244.%d.%d", 1+j, 1+i%250), fmt.Sprintf("node-%d", j))
	}
	return makeSlice("bench", fmt.Sprintf("s%d", i), fmt.Sprintf("s%d-1", i), httpPorts, eps...)
}

// TestSharedPickerChains checks that the chain picking one of n endpoints lives as long
// as some service uses it: a service leaving it does not flush it under another one.
func TestSharedPickerChains(t *testing.T) {
	p, fake := newTestProxier(t)
	two := func(name, ip string, a, b string) {
		p.OnServiceAdd(makeService("ns", name, ip, nil))
		p.OnEndpointSliceAdd(makeSlice("ns", name, name+"-1", httpPorts, ready(a, testNode), ready(b, "node-b")))
	}
	two("a", "10.96.1.1", "10.244.1.1", "10.244.2.1")
	two("b", "10.96.1.2", "10.244.1.2", "10.244.2.2")
	mustSync(t, p)
	picker := pickerChainName("tcp", 2)
	p.OnServiceDelete(makeService("ns", "a", "10.96.1.1", nil))
	mustSync(t, p)
	mustSync(t, p)
	if c := fake.Table.Chains[picker]; c == nil || len(c.Rules) != 2 {
		t.Fatalf("%s lost while service b still uses it:\n%s", picker, fake.Dump())
	}
	if got := trace(t, fake, pkt("10.244.3.9", "10.96.1.2", "tcp", 80)); got != "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080" {
		t.Errorf("service b: %s", got)
	}
	p.OnServiceDelete(makeService("ns", "b", "10.96.1.2", nil))
	mustSync(t, p)
	if c := fake.Table.Chains[picker]; c == nil || len(c.Rules) != 0 {
		t.Errorf("unused %s should be flushed and kept for one sync", picker)
	}
	mustSync(t, p)
	if fake.Table.Chains[picker] != nil {
		t.Errorf("unused %s not deleted by the next sync", picker)
	}
}

// TestZoneFollowsTheNode: zone hints pick the endpoints of the zone the node is in now,
// not the one it started with.
func TestZoneFollowsTheNode(t *testing.T) {
	p, fake := newTestProxier(t) // starts in zone-a
	p.OnServiceAdd(makeService("ns", "zonal", "10.96.0.70", func(s *v1.Service) {
		s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferSameZone)
	}))
	p.OnEndpointSliceAdd(makeSlice("ns", "zonal", "z-1", httpPorts,
		ep{ip: "10.244.2.10", ready: true, serving: true, node: "node-b", zoneHints: []string{"zone-a"}},
		ep{ip: "10.244.3.10", ready: true, serving: true, node: "node-c", zoneHints: []string{"zone-b"}}))
	mustSync(t, p)
	from := pkt("10.244.1.9", "10.96.0.70", "tcp", 80)
	if got, want := trace(t, fake, from), "accept dnat 10.244.2.10:8080"; got != want {
		t.Fatalf("in zone-a: %s, want %s", got, want)
	}
	p.SetZone("zone-b")
	mustSync(t, p)
	if got, want := trace(t, fake, from), "accept dnat 10.244.3.10:8080"; got != want {
		t.Fatalf("after moving to zone-b: %s, want %s", got, want)
	}
	p.SetZone("")
	mustSync(t, p)
	if got, want := trace(t, fake, from), "accept dnat 10.244.2.10:8080 | accept dnat 10.244.3.10:8080"; got != want {
		t.Fatalf("without a zone: %s, want %s", got, want)
	}
}
