package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tranche/tranche/internal/proxy/tracer"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func newTestIPTablesProxier(t testing.TB) (*IPTablesProxier, *FakeIPTables) {
	t.Helper()
	fake := NewFakeIPTables()
	cfg := DefaultConfig(testNode)
	cfg.Zone = "zone-a"
	cfg.NodeIP = nodeIP
	p, err := NewIPTablesProxier(fake, ProxierConfig{Config: cfg, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func mustSyncIPT(t testing.TB, p *IPTablesProxier) {
	t.Helper()
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func lastRestore(t testing.TB, f *FakeIPTables) string {
	t.Helper()
	if len(f.Restores) == 0 {
		t.Fatal("nothing restored")
	}
	return string(f.Restores[len(f.Restores)-1])
}

func walk(t *testing.T, f *FakeIPTables, c traceCase) {
	t.Helper()
	w := &iptWalker{f: f, local: []netip.Addr{nodeIP}}
	got, err := w.trace(c.pkt)
	if err != nil {
		t.Fatalf("walking %+v: %v", c.pkt, err)
	}
	if got != c.want {
		t.Errorf("walk %v -> %v:%d/%s:\n got %s\nwant %s", c.pkt.Src, c.pkt.Dst, c.pkt.DPort, c.pkt.Proto, got, c.want)
	}
}

// TestIPTablesRules loads representative services, compares the restore input with a
// golden file (testdata/iptables) and walks packets through the resulting tables.
func TestIPTablesRules(t *testing.T) {
	const ns = "demo"
	tests := []modeCase{
		{
			name:   "clusterip-1-endpoint",
			svcs:   []*v1.Service{makeService(ns, "one", "10.96.0.10", nil)},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "one", "one-1", httpPorts, ready("10.244.1.2", testNode))},
			traces: []traceCase{
				{pkt("10.244.3.9", "10.96.0.10", "tcp", 80), "accept dnat 10.244.1.2:8080"},
				{pkt("10.240.0.9", "10.96.0.10", "tcp", 80), "accept dnat 10.244.1.2:8080 masquerade"},
				// Hairpin: the endpoint reaching itself is masqueraded.
				{pkt("10.244.1.2", "10.96.0.10", "tcp", 80), "accept dnat 10.244.1.2:8080 masquerade"},
				{pkt("10.244.3.9", "10.96.0.10", "udp", 80), "accept"},
			},
		},
		{
			name: "clusterip-3-endpoints",
			svcs: []*v1.Service{makeService(ns, "three", "10.96.0.11", func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "three", "three-1",
				[]discoveryv1.EndpointPort{port("http", 8080, v1.ProtocolTCP), port("dns", 5353, v1.ProtocolUDP)},
				ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"), ready("10.244.3.2", "node-c"))},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.11", "tcp", 80), "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080 | accept dnat 10.244.3.2:8080"},
				{pkt("10.244.1.9", "10.96.0.11", "udp", 53), "accept dnat 10.244.1.2:5353 | accept dnat 10.244.2.2:5353 | accept dnat 10.244.3.2:5353"},
			},
		},
		sharedCase(ns, "nodeport"),
		sharedCase(ns, "loadbalancer-source-ranges"),
		sharedCase(ns, "loadbalancer-source-ranges-node"),
		sharedCase(ns, "session-affinity"),
		{
			name: "external-policy-local",
			svcs: []*v1.Service{makeService(ns, "loc", "10.96.0.50", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30050
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32000
			}), makeService(ns, "remote-only", "10.96.0.52", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30052
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			})},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice(ns, "loc", "loc-1", httpPorts, ready("10.244.1.3", testNode), ready("10.244.2.3", "node-b")),
				makeSlice(ns, "remote-only", "ro-1", httpPorts, ready("10.244.2.6", "node-b")),
			},
			traces: []traceCase{
				// An external client keeps its address and gets a local endpoint only.
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30050), "accept dnat 10.244.1.3:8080"},
				// Pods may use any endpoint.
				{pkt("10.244.1.9", "10.240.0.2", "tcp", 30050), "accept dnat 10.244.1.3:8080 | accept dnat 10.244.2.3:8080"},
				// The node itself is masqueraded and may use any endpoint.
				{fromHost(pkt("10.240.0.2", "10.240.0.2", "tcp", 30050)), "accept dnat 10.244.1.3:8080 masquerade | accept dnat 10.244.2.3:8080 masquerade"},
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30052), "drop"},
				{pkt("10.244.1.9", "10.240.0.2", "tcp", 30052), "accept dnat 10.244.2.6:8080"},
				{pkt("10.244.1.9", "10.96.0.52", "tcp", 80), "accept dnat 10.244.2.6:8080"},
			},
		},
		{
			name: "internal-policy-local",
			svcs: []*v1.Service{makeService(ns, "itp", "10.96.0.51", func(s *v1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			}), makeService(ns, "itp-remote", "10.96.0.53", func(s *v1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			})},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice(ns, "itp", "itp-1", httpPorts, ready("10.244.1.4", testNode), ready("10.244.2.4", "node-b")),
				makeSlice(ns, "itp-remote", "itpr-1", httpPorts, ready("10.244.2.9", "node-b")),
			},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.51", "tcp", 80), "accept dnat 10.244.1.4:8080"},
				{pkt("10.244.1.9", "10.96.0.53", "tcp", 80), "drop"},
			},
		},
		{
			name: "no-endpoints",
			svcs: []*v1.Service{makeService(ns, "empty", "10.96.0.61", nil), makeService(ns, "empty-np", "10.96.0.62", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30062
			})},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.61", "tcp", 80), "reject tcp-reset"},
				{pkt("192.168.7.1", "10.240.0.2", "tcp", 30062), "reject tcp-reset"},
			},
		},
		{
			name: "terminating-fallback",
			svcs: []*v1.Service{makeService(ns, "draining", "10.96.0.60", nil)},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "draining", "d-1", httpPorts,
				ep{ip: "10.244.1.8", serving: true, terminating: true, node: testNode},
				ep{ip: "10.244.2.8", serving: false, terminating: true, node: "node-b"})},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.60", "tcp", 80), "accept dnat 10.244.1.8:8080"},
			},
		},
		{
			name: "topology-hints",
			svcs: []*v1.Service{makeService(ns, "zonal", "10.96.0.70", func(s *v1.Service) {
				s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferSameZone)
			})},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice(ns, "zonal", "z-1", httpPorts,
					ep{ip: "10.244.1.10", ready: true, serving: true, node: testNode, zoneHints: []string{"zone-a"}},
					ep{ip: "10.244.2.10", ready: true, serving: true, node: "node-b", zoneHints: []string{"zone-a"}},
					ep{ip: "10.244.3.10", ready: true, serving: true, node: "node-c", zoneHints: []string{"zone-b"}}),
			},
			traces: []traceCase{
				{pkt("10.244.1.9", "10.96.0.70", "tcp", 80), "accept dnat 10.244.1.10:8080 | accept dnat 10.244.2.10:8080"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fake := newTestIPTablesProxier(t)
			for _, s := range tc.svcs {
				p.OnServiceAdd(s)
			}
			for _, s := range tc.slices {
				p.OnEndpointSliceAdd(s)
			}
			mustSyncIPT(t, p)
			golden(t, "iptables/"+tc.name, lastRestore(t, fake))
			for _, c := range tc.traces {
				walk(t, fake, c)
			}
		})
	}
}

// TestIPTablesNames checks the chain names against kube-proxy's recipe, computed here
// independently of the generator, and the probability format.
func TestIPTablesNames(t *testing.T) {
	spn := ServicePortName{Port: "http", Protocol: v1.ProtocolTCP}
	spn.Namespace, spn.Name = "demo", "web"
	if got := kubeProxyPortName(spn); got != "demo/web:http" {
		t.Errorf("port name %q", got)
	}
	spn.Port = ""
	if got := kubeProxyPortName(spn); got != "demo/web" {
		t.Errorf("unnamed port name %q", got)
	}
	// Names kube-proxy gives the same service port and endpoint (its own tests list
	// them): the generator must produce exactly these.
	r := buildIPTService(DefaultConfig(testNode), map[ServicePortName]*ServicePort{
		{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP}: {
			Name:      ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP},
			ClusterIP: netip.MustParseAddr("10.20.30.41"), Port: 80,
		},
	}, map[ServicePortName][]Endpoint{
		{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP}: {
			{IP: netip.MustParseAddr("10.180.0.1"), Port: 80, Ready: true, Serving: true, NodeName: "node-x"},
		},
	})
	for _, want := range []string{"KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SEP-SXIVWICOYRO3J4NJ"} {
		if _, ok := r.chains[want]; !ok {
			t.Errorf("no chain %s among %v", want, slices.Collect(maps.Keys(r.chains)))
		}
	}
	for n, want := range map[int]string{1: "1.0000000000", 2: "0.5000000000", 3: "0.3333333333", 7: "0.1428571429"} {
		if got := probability(n); got != want {
			t.Errorf("probability(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestIPTablesPartialSync checks that after one endpoint change only that service's
// chains are written (the top-level chains always are), that the removed endpoint's
// chain is deleted, and that the result equals a full sync of the same state.
func TestIPTablesPartialSync(t *testing.T) {
	p, fake := newTestIPTablesProxier(t)
	for i := range 3 {
		p.OnServiceAdd(makeService("demo", fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.1.%d", i+1), nil))
		p.OnEndpointSliceAdd(makeSlice("demo", fmt.Sprintf("s%d", i), fmt.Sprintf("s%d-1", i), httpPorts,
			ready(fmt.Sprintf("10.244.1.%d", i+1), testNode), ready(fmt.Sprintf("10.244.2.%d", i+1), "node-b")))
	}
	mustSyncIPT(t, p)
	p.OnEndpointSliceUpdate(nil, makeSlice("demo", "s1", "s1-1", httpPorts, ready("10.244.1.2", testNode)))
	mustSyncIPT(t, p)
	partial := lastRestore(t, fake)
	golden(t, "iptables/partial-sync", partial)
	sep := iptEndpointChainName("demo/s1:http", "tcp", "10.244.2.2:8080")
	if !strings.Contains(partial, "-X "+sep+"\n") {
		t.Errorf("partial sync does not delete %s", sep)
	}
	for _, other := range []string{"demo/s0:http", "demo/s2:http"} {
		if c := iptClusterPrefix + portProtoHash(other, "tcp"); strings.Contains(partial, ":"+c+" ") {
			t.Errorf("partial sync rewrites %s of unchanged %s", c, other)
		}
	}
	if _, ok := fake.Chain("nat", sep); ok {
		t.Errorf("%s still exists", sep)
	}
	w := &iptWalker{f: fake, local: []netip.Addr{nodeIP}}
	if got, err := w.trace(pkt("10.244.1.9", "10.96.1.2", "tcp", 80)); err != nil || got != "accept dnat 10.244.1.2:8080" {
		t.Errorf("after partial sync: %s %v", got, err)
	}
	afterPartial, _ := fake.Save(context.Background(), "nat")

	// A full sync of the same state changes nothing.
	p.needFull = true
	mustSyncIPT(t, p)
	afterFull, _ := fake.Save(context.Background(), "nat")
	if string(afterPartial) != string(afterFull) {
		t.Errorf("partial sync result differs from full sync:\n%s\n---\n%s", afterPartial, afterFull)
	}
	// The jumps from the built-in chains were inserted once.
	if rules, _ := fake.Chain("nat", "PREROUTING"); len(rules) != 1 {
		t.Errorf("PREROUTING: %q", rules)
	}
	// Deleting a service deletes its chains.
	p.OnServiceDelete(makeService("demo", "s2", "10.96.1.3", nil))
	mustSyncIPT(t, p)
	if _, ok := fake.Chain("nat", iptClusterPrefix+portProtoHash("demo/s2:http", "tcp")); ok {
		t.Error("deleted service's chain remains")
	}
}

// TestIPTablesFailedRestore checks that a failed restore changes nothing and makes the
// next sync full.
func TestIPTablesFailedRestore(t *testing.T) {
	p, fake := newTestIPTablesProxier(t)
	p.OnServiceAdd(makeService("demo", "a", "10.96.1.1", nil))
	p.OnEndpointSliceAdd(makeSlice("demo", "a", "a-1", httpPorts, ready("10.244.1.1", testNode)))
	mustSyncIPT(t, p)
	before, _ := fake.Save(context.Background(), "nat")
	fake.FailNext = errors.New("iptables-restore: line 3 failed")
	p.OnServiceAdd(makeService("demo", "b", "10.96.1.2", nil))
	if err := p.Sync(context.Background()); err == nil {
		t.Fatal("sync succeeded")
	}
	if after, _ := fake.Save(context.Background(), "nat"); string(after) != string(before) {
		t.Error("failed restore changed the table")
	}
	mustSyncIPT(t, p)
	if !strings.Contains(lastRestore(t, fake), ":"+iptClusterPrefix+portProtoHash("demo/a:http", "tcp")+" ") {
		t.Error("the sync after a failure is not full")
	}
	w := &iptWalker{f: fake, local: []netip.Addr{nodeIP}}
	if got, _ := w.trace(pkt("10.244.1.9", "10.96.1.2", "tcp", 80)); got != "reject tcp-reset" {
		t.Errorf("service b: %s", got)
	}
}

// TestFakeIPTablesValidates checks that the fake refuses what iptables-restore refuses.
func TestFakeIPTablesValidates(t *testing.T) {
	for name, in := range map[string]string{
		"missing chain":     "*nat\n-A KUBE-NOPE -j ACCEPT\nCOMMIT\n",
		"missing target":    "*nat\n:KUBE-A - [0:0]\n-A KUBE-A -j KUBE-B\nCOMMIT\n",
		"unknown option":    "*nat\n:KUBE-A - [0:0]\n-A KUBE-A --bogus 1 -j ACCEPT\nCOMMIT\n",
		"no commit":         "*nat\n:KUBE-A - [0:0]\n",
		"unknown table":     "*mangle2\nCOMMIT\n",
		"delete referenced": "*nat\n:KUBE-A - [0:0]\n:KUBE-B - [0:0]\n-A KUBE-A -j KUBE-B\n-X KUBE-B\nCOMMIT\n",
		"long name":         "*nat\n:KUBE-SVC-ABCDEFGHIJKLMNOPQRSTU - [0:0]\nCOMMIT\n",
	} {
		f := NewFakeIPTables()
		if err := f.Restore(context.Background(), []byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if len(f.Restores) != 0 {
			t.Errorf("%s: recorded", name)
		}
	}
}

// TestCleanupIPTables checks that the cleanup removes every KUBE-* chain and the jumps
// into them and leaves other rules alone.
func TestCleanupIPTables(t *testing.T) {
	p, fake := newTestIPTablesProxier(t)
	p.OnServiceAdd(makeService("demo", "a", "10.96.1.1", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30001
	}))
	p.OnEndpointSliceAdd(makeSlice("demo", "a", "a-1", httpPorts, ready("10.244.1.1", testNode)))
	p.OnServiceAdd(makeService("demo", "b", "10.96.1.2", nil))
	mustSyncIPT(t, p)
	other := "*filter\n:OTHER - [0:0]\n-A INPUT -j OTHER\n-A OTHER -s 10.1.0.0/16 -j ACCEPT\nCOMMIT\n"
	if err := fake.Restore(context.Background(), []byte(other)); err != nil {
		t.Fatal(err)
	}
	if err := CleanupIPTables(context.Background(), fake); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"filter", "nat"} {
		out, _ := fake.Save(context.Background(), table)
		if strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s still has KUBE- rules:\n%s", table, out)
		}
	}
	if rules, _ := fake.Chain("filter", "INPUT"); len(rules) != 1 {
		t.Errorf("cleanup touched others' rules: %q", rules)
	}
	n := len(fake.Restores)
	if err := CleanupIPTables(context.Background(), fake); err != nil || len(fake.Restores) != n {
		t.Errorf("second cleanup: %v, %d restores", err, len(fake.Restores)-n)
	}
}

type recordingConntrack struct{ flows []StaleFlow }

func (r *recordingConntrack) DeleteUDP(flows []StaleFlow) (int, error) {
	r.flows = append(r.flows, flows...)
	return len(flows), nil
}

// TestIPTablesWalkerRefusesUnknownShapes checks that the walker fails on a rule shape
// the generator does not write, instead of guessing.
func TestIPTablesWalkerRefusesUnknownShapes(t *testing.T) {
	for _, rule := range []string{
		"-A KUBE-SERVICES -m string --string x -j ACCEPT",
		"-A KUBE-SERVICES -m statistic --mode nth --every 2 -j ACCEPT",
		"-A KUBE-SERVICES -j DNAT --to-destination 10.1.1.1:80 --persistent",
	} {
		f := NewFakeIPTables()
		f.tables["nat"].chains["KUBE-SERVICES"] = []string{strings.TrimPrefix(rule, "-A KUBE-SERVICES ")}
		f.tables["nat"].chains["PREROUTING"] = []string{"-j KUBE-SERVICES"}
		w := &iptWalker{f: f}
		if got, err := w.trace(pkt("10.244.1.9", "10.96.0.1", "tcp", 80)); err == nil {
			t.Errorf("%s: walked to %s", rule, got)
		}
	}
}

// TestIPTablesBadInput checks that what the mode cannot program is skipped with a
// Warning Event and a log line while everything else stays programmed: an unusable
// endpoint address, and a service whose rules iptables-restore refuses (here a kernel
// without SCTP), which is programmed again once it changes into something accepted.
func TestIPTablesBadInput(t *testing.T) {
	events := &eventLog{}
	var log bytes.Buffer
	fake := NewFakeIPTables()
	fake.Refuse = func(line string) bool { return strings.Contains(line, "-p sctp") }
	cfg := DefaultConfig(testNode)
	p, err := NewIPTablesProxier(fake, ProxierConfig{Config: cfg, Recorder: events,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sctp := func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }
	p.OnServiceAdd(makeService("demo", "a", "10.96.1.1", nil))
	p.OnServiceAdd(makeService("demo", "b", "10.96.1.2", sctp))
	p.OnServiceAdd(makeService("demo", "c", "10.96.1.3", nil))
	p.OnEndpointSliceAdd(makeSlice("demo", "a", "a-1", httpPorts, ready("10.244.1.1", testNode), ready("127.0.0.1", testNode)))
	p.OnEndpointSliceAdd(makeSlice("demo", "b", "b-1", []discoveryv1.EndpointPort{port("http", 8080, v1.ProtocolSCTP)}, ready("10.244.1.2", testNode)))
	p.OnEndpointSliceAdd(makeSlice("demo", "c", "c-1", httpPorts, ready("10.244.1.3", testNode)))
	mustSyncIPT(t, p)

	w := &iptWalker{f: fake, local: []netip.Addr{nodeIP}}
	for dst, want := range map[string]string{"10.96.1.1": "accept dnat 10.244.1.1:8080", "10.96.1.3": "accept dnat 10.244.1.3:8080"} {
		if got, err := w.trace(pkt("10.244.1.9", dst, "tcp", 80)); err != nil || got != want {
			t.Errorf("%s: got %s (%v), want %s", dst, got, err, want)
		}
	}
	if got, err := w.trace(pkt("10.244.1.9", "10.96.1.2", "sctp", 80)); err != nil || got != "accept" {
		t.Errorf("refused service: got %s (%v), want nothing programmed", got, err)
	}
	got := events.take()
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Object+" "+e.Reason)
	}
	want := []string{"EndpointSlice demo/a-1 " + ReasonUnusableEndpointAddress, "Service demo/b " + ReasonRulesRejected}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s\n%+v", diff, got)
	}
	if !strings.Contains(log.String(), "iptables-restore refused a service's rules") || !strings.Contains(log.String(), "skipping unusable endpoint addresses") {
		t.Errorf("log:\n%s", log.String())
	}

	// Changed into something the kernel accepts, it is programmed by a partial sync.
	p.OnServiceUpdate(nil, makeService("demo", "b", "10.96.1.2", nil))
	p.OnEndpointSliceUpdate(nil, makeSlice("demo", "b", "b-1", httpPorts, ready("10.244.1.2", testNode)))
	mustSyncIPT(t, p)
	if got, err := w.trace(pkt("10.244.1.9", "10.96.1.2", "tcp", 80)); err != nil || got != "accept dnat 10.244.1.2:8080" {
		t.Errorf("fixed service: got %s (%v)", got, err)
	}
	if p.rejected.Len() != 0 {
		t.Errorf("still rejected: %v", p.rejected)
	}
}

// TestIPTablesNatCommittedFirst checks the order of the restore input: a nat table
// refused leaves the filter table untouched too, and a filter table refused after the
// nat one was committed is repaired by the full sync that follows.
func TestIPTablesNatCommittedFirst(t *testing.T) {
	p, fake := newTestIPTablesProxier(t)
	p.OnServiceAdd(makeService("demo", "a", "10.96.1.1", nil))
	mustSyncIPT(t, p)
	filterBefore, _ := fake.Save(context.Background(), "filter")

	// a gets an endpoint (its filter reject goes) while b is refused in nat.
	fake.Refuse = func(line string) bool { return strings.Contains(line, "10.96.1.2") }
	p.OnEndpointSliceAdd(makeSlice("demo", "a", "a-1", httpPorts, ready("10.244.1.1", testNode)))
	p.OnServiceAdd(makeService("demo", "b", "10.96.1.2", nil))
	p.OnEndpointSliceAdd(makeSlice("demo", "b", "b-1", httpPorts, ready("10.244.1.2", testNode)))
	if err := p.Sync(context.Background()); err == nil {
		t.Fatal("refused partial sync succeeded")
	}
	if filterAfter, _ := fake.Save(context.Background(), "filter"); string(filterAfter) != string(filterBefore) {
		t.Errorf("a refused nat table changed the filter table:\n%s", filterAfter)
	}

	// Only the filter table is refused now: nat is committed, filter is not.
	fake.Refuse = func(line string) bool { return strings.HasPrefix(line, "-A KUBE-FORWARD") }
	if err := p.Sync(context.Background()); err == nil {
		t.Fatal("refused full sync succeeded")
	}
	fake.Refuse = nil
	mustSyncIPT(t, p)
	w := &iptWalker{f: fake, local: []netip.Addr{nodeIP}}
	for dst, want := range map[string]string{"10.96.1.1": "accept dnat 10.244.1.1:8080", "10.96.1.2": "accept dnat 10.244.1.2:8080"} {
		if got, err := w.trace(pkt("10.244.1.9", dst, "tcp", 80)); err != nil || got != want {
			t.Errorf("%s: got %s (%v), want %s", dst, got, err, want)
		}
	}
	if rules, _ := fake.Chain("filter", iptServicesChain); len(rules) != 0 {
		t.Errorf("stale filter rules: %q", rules)
	}
}

// TestIPTablesRunSyncsOnChange checks that Run syncs at once and again when a change
// arrives.
func TestIPTablesRunSyncsOnChange(t *testing.T) {
	p, fake := newTestIPTablesProxier(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	restores := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.Restores)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the first sync", func() bool { return restores() >= 1 })
	p.OnServiceAdd(makeService("demo", "a", "10.96.1.1", nil))
	waitFor("the sync of the new service", func() bool {
		rules, _ := fake.Chain("filter", iptServicesChain)
		return len(rules) == 1
	})
}

// TestIPTablesKernelMissing checks the start-up error on a node without iptables.
func TestIPTablesKernelMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := NewIPTablesKernel()
	if err == nil || !strings.Contains(err.Error(), "Debian's iptables package") || !strings.Contains(err.Error(), "iptables-restore") {
		t.Errorf("error %v does not name the missing command and the package", err)
	}
}

func fromHost(p tracer.Packet) tracer.Packet {
	p.FromHost = true
	return p
}
