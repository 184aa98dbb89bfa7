package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/ipvs"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

type ipvsFixture struct {
	p      *IPVSProxier
	h      *FakeIPVS
	dev    *FakeIPVSDevice
	rules  *FakeIPVSRules
	events *eventLog
}

func newIPVSFixture(t testing.TB, opts IPVSOptions) *ipvsFixture {
	t.Helper()
	f := &ipvsFixture{h: NewFakeIPVS(), dev: NewFakeIPVSDevice(), rules: &FakeIPVSRules{}, events: &eventLog{}}
	cfg := DefaultConfig(testNode)
	cfg.Zone = "zone-a"
	cfg.NodeIP = nodeIP
	opts.Device, opts.Rules = f.dev, f.rules
	if opts.NodeAddresses == nil {
		opts.NodeAddresses = []netip.Addr{nodeIP}
	}
	p, err := NewIPVSProxier(f.h, ProxierConfig{Config: cfg, Registerer: prometheus.NewRegistry(), Recorder: f.events}, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	return f
}

func (f *ipvsFixture) sync(t testing.TB) {
	t.Helper()
	if err := f.p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// dump is the golden text: ipvsadm -Ln, the device's addresses, the ipset members.
func (f *ipvsFixture) dump() string {
	var b strings.Builder
	b.WriteString("# ipvsadm -Ln\n" + f.h.Dump())
	b.WriteString("# ip -br addr show " + IPVSDeviceName + "\n" + f.dev.Dump())
	b.WriteString("# ipset members\n" + f.rules.Members())
	return b.String()
}

func ipvsGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "ipvs", name+".txt")
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
		t.Errorf("ipvs state differs from %s (-want +got):\n%s", path, d)
	}
}

// ipvsCase is a shared scenario's Services for TestIPVSRules (its expected fates are
// for the modes that can be traced).
func ipvsCase(c modeCase) ipvsRulesCase {
	return ipvsRulesCase{name: c.name, svcs: c.svcs, slices: c.slices}
}

// ipvsRulesCase is one scenario of TestIPVSRules.
type ipvsRulesCase struct {
	name   string
	opts   IPVSOptions
	svcs   []*v1.Service
	slices []*discoveryv1.EndpointSlice
	events []string
}

// TestIPVSRules loads representative services into the ipvs mode and compares the
// fake kernel's state with golden files.
func TestIPVSRules(t *testing.T) {
	const ns = "demo"
	tests := []ipvsRulesCase{
		{
			name:   "clusterip-1",
			svcs:   []*v1.Service{makeService(ns, "one", "10.96.0.10", nil)},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "one", "one-1", httpPorts, ready("10.244.2.2", "node-b"))},
		},
		{
			name: "clusterip-3",
			opts: IPVSOptions{Scheduler: "lc"},
			svcs: []*v1.Service{makeService(ns, "dns", "10.96.0.11", func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}}
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "dns", "dns-1",
				[]discoveryv1.EndpointPort{port("dns", 5353, v1.ProtocolUDP), port("dns-tcp", 5353, v1.ProtocolTCP)},
				ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"), ready("10.244.3.2", "node-c"))},
		},
		{
			name: "nodeport",
			opts: IPVSOptions{NodeAddresses: []netip.Addr{nodeIP, netip.MustParseAddr("10.240.1.2")}},
			svcs: []*v1.Service{makeService(ns, "web", "10.96.0.20", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "web", "web-1", httpPorts, ready("10.244.2.5", "node-b"))},
		},
		{
			name: "loadbalancer-source-ranges",
			svcs: []*v1.Service{makeService(ns, "lb", "10.96.0.30", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30090
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/16", "172.16.1.1/32"}
				s.Spec.ExternalIPs = []string{"192.0.2.7"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.1"}}
			})},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "lb", "lb-1", httpPorts, ready("10.244.2.5", "node-b"))},
		},
		ipvsCase(sharedCase(ns, "loadbalancer-source-ranges-node")),
		ipvsCase(sharedCase(ns, "session-affinity")),
		{
			name: "external-policy-local",
			svcs: []*v1.Service{makeService(ns, "loc", "10.96.0.50", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30050
				s.Spec.HealthCheckNodePort = 32000
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.5"}}
			}), makeService(ns, "remote-only", "10.96.0.52", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30052
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			})},
			slices: []*discoveryv1.EndpointSlice{
				makeSlice(ns, "loc", "loc-1", httpPorts, ready("10.244.1.3", testNode), ready("10.244.2.3", "node-b")),
				makeSlice(ns, "remote-only", "ro-1", httpPorts, ready("10.244.2.6", "node-b")),
			},
			events: []string{"Service demo/remote-only Warning " + ReasonIPVSDifference},
		},
		{
			name: "terminating-and-none",
			svcs: []*v1.Service{makeService(ns, "draining", "10.96.0.60", nil), makeService(ns, "empty", "10.96.0.61", nil)},
			slices: []*discoveryv1.EndpointSlice{makeSlice(ns, "draining", "d-1", httpPorts,
				ep{ip: "10.244.1.8", serving: true, terminating: true, node: testNode},
				ep{ip: "10.244.2.8", serving: false, terminating: true, node: "node-b"})},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newIPVSFixture(t, tc.opts)
			for _, s := range tc.svcs {
				f.p.OnServiceAdd(s)
			}
			for _, s := range tc.slices {
				f.p.OnEndpointSliceAdd(s)
			}
			f.sync(t)
			ipvsGolden(t, tc.name, f.dump())
			var got []string
			for _, e := range f.events.take() {
				got = append(got, e.Object+" "+e.Type+" "+e.Reason)
			}
			if d := cmp.Diff(tc.events, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			// A second sync with nothing changed makes no call.
			f.h.ResetCalls()
			f.dev.Calls = nil
			f.sync(t)
			if len(f.h.Calls)+len(f.dev.Calls) != 0 {
				t.Errorf("a sync without changes made calls %q %q", f.h.Calls, f.dev.Calls)
			}
		})
	}
}

// TestIPVSRuleText pins the iptables rules, the jumps into them and the ipset text.
func TestIPVSRuleText(t *testing.T) {
	f := newIPVSFixture(t, IPVSOptions{})
	f.p.OnServiceAdd(makeService("demo", "web", "10.96.0.20", nil))
	f.sync(t)
	var b strings.Builder
	b.WriteString("# iptables-restore --noflush\n" + f.rules.IPTables + "# jumps\n")
	for _, j := range f.rules.Jumps {
		fmt.Fprintf(&b, "-t %s -I %s -m comment --comment %q -j %s\n", j.Table, j.Chain, j.Comment, j.Target)
	}
	b.WriteString("# ipset -exist restore\n" + f.rules.IPSets)
	ipvsGolden(t, "rules", b.String())
}

// TestIPVSEndpointChangeMinimalCalls checks that replacing one endpoint is one add and
// one delete, that a service's deletion deletes its virtual server and address, and
// that the iptables rules are not rewritten when only members change.
func TestIPVSEndpointChangeMinimalCalls(t *testing.T) {
	f := newIPVSFixture(t, IPVSOptions{})
	svc := makeService("ns", "web", "10.96.0.1", nil)
	f.p.OnServiceAdd(svc)
	f.p.OnServiceAdd(makeService("ns", "other", "10.96.0.2", nil))
	old := makeSlice("ns", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	f.p.OnEndpointSliceAdd(old)
	f.sync(t)
	writes := f.rules.Writes
	f.h.ResetCalls()

	cur := makeSlice("ns", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.3.2", "node-c"))
	f.p.OnEndpointSliceUpdate(old, cur)
	f.sync(t)
	want := []string{"add TCP 10.96.0.1:80 -> 10.244.3.2:8080 w1", "delete TCP 10.96.0.1:80 -> 10.244.2.2:8080 w1"}
	if d := cmp.Diff(want, f.h.Calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if f.rules.Writes != writes {
		t.Errorf("an endpoint change rewrote the rules %d times", f.rules.Writes-writes)
	}

	f.h.ResetCalls()
	f.dev.Calls = nil
	f.p.OnServiceDelete(svc)
	f.p.OnEndpointSliceDelete(cur)
	f.sync(t)
	if d := cmp.Diff([]string{"delete TCP 10.96.0.1:80"}, f.h.Calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"del 10.96.0.1"}, f.dev.Calls); d != "" {
		t.Errorf("device calls (-want +got):\n%s", d)
	}
	if strings.Contains(f.rules.Members(), "10.96.0.1") {
		t.Errorf("the deleted service is still in the ipsets:\n%s", f.rules.Members())
	}
	if want := "del KUBE-CLUSTER-IP 10.96.0.1,tcp:80\ndel KUBE-IPVS-IPS 10.96.0.1\ndel KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2\n"; f.rules.IPSets != want {
		t.Errorf("ipset restore after a deletion:\n%s\nwant only\n%s", f.rules.IPSets, want)
	}
}

// TestIPVSTerminatingDrains checks upstream's graceful termination: an endpoint that
// turns terminating while others are ready is kept at weight 0 as long as the kernel
// counts connections to it, and deleted once it counts none.
func TestIPVSTerminatingDrains(t *testing.T) {
	f := newIPVSFixture(t, IPVSOptions{})
	f.p.OnServiceAdd(makeService("demo", "web", "10.96.0.1", nil))
	s1 := makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	f.p.OnEndpointSliceAdd(s1)
	f.sync(t)
	if err := f.h.SetConnections("TCP", "10.96.0.1:80", "10.244.2.2:8080", 3, 1); err != nil {
		t.Fatal(err)
	}
	s2 := makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode),
		ep{ip: "10.244.2.2", serving: true, terminating: true, node: "node-b"})
	f.p.OnEndpointSliceUpdate(s1, s2)
	f.h.ResetCalls()
	f.sync(t)
	ipvsGolden(t, "terminating-weight-0", f.dump())
	if d := cmp.Diff([]string{"edit TCP 10.96.0.1:80 -> 10.244.2.2:8080 w0"}, f.h.Calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	// Still connected: a sync keeps it and makes no call.
	f.h.ResetCalls()
	f.sync(t)
	if len(f.h.Calls) != 0 {
		t.Errorf("calls while draining: %q", f.h.Calls)
	}
	// Drained: the next sync deletes it, though nothing changed in the API.
	if err := f.h.SetConnections("TCP", "10.96.0.1:80", "10.244.2.2:8080", 0, 0); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	if d := cmp.Diff([]string{"delete TCP 10.96.0.1:80 -> 10.244.2.2:8080 w0"}, f.h.Calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	// A UDP real server has nothing to drain: it goes at once.
	f.p.OnServiceAdd(makeService("demo", "dns", "10.96.0.10", func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolUDP }))
	udp := []discoveryv1.EndpointPort{port("http", 53, v1.ProtocolUDP)}
	d1 := makeSlice("demo", "dns", "dns-1", udp, ready("10.244.1.3", testNode), ready("10.244.2.3", "node-b"))
	f.p.OnEndpointSliceAdd(d1)
	f.sync(t)
	if err := f.h.SetConnections("UDP", "10.96.0.10:80", "10.244.2.3:53", 0, 5); err != nil {
		t.Fatal(err)
	}
	f.h.ResetCalls()
	f.p.OnEndpointSliceUpdate(d1, makeSlice("demo", "dns", "dns-1", udp, ready("10.244.1.3", testNode)))
	f.sync(t)
	if d := cmp.Diff([]string{"delete UDP 10.96.0.10:80 -> 10.244.2.3:53 w1"}, f.h.Calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

// TestIPVSFullResyncAfterFailure checks that a refused call fails the sync and that the
// next (full) sync re-reads the kernel and repairs it, also what was changed behind
// the proxier's back.
func TestIPVSFullResyncAfterFailure(t *testing.T) {
	f := newIPVSFixture(t, IPVSOptions{})
	f.p.OnServiceAdd(makeService("demo", "web", "10.96.0.1", nil))
	f.p.OnEndpointSliceAdd(makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b")))
	fail := true
	f.h.Fail = func(call string) error {
		if fail && strings.Contains(call, "10.244.2.2") {
			return syscall.ENOMEM
		}
		return nil
	}
	if err := f.p.Sync(context.Background()); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("sync with a refused call: %v", err)
	}
	fail = false
	// A stranger's virtual server and a changed scheduler are repaired too.
	if err := f.h.NewService(&ipvs.Service{Address: []byte{10, 96, 9, 9}, Protocol: syscall.IPPROTO_TCP, Port: 1, SchedName: "rr", AddressFamily: syscall.AF_INET}); err != nil {
		t.Fatal(err)
	}
	if err := f.h.UpdateService(&ipvs.Service{Address: []byte{10, 96, 0, 1}, Protocol: syscall.IPPROTO_TCP, Port: 80, SchedName: "sh", AddressFamily: syscall.AF_INET, Netmask: 0xffffffff}); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	want := `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.1:80 rr
  -> 10.244.1.2:8080              Masq    1      0          0
  -> 10.244.2.2:8080              Masq    1      0          0
`
	if d := cmp.Diff(want, f.h.Dump()); d != "" {
		t.Errorf("after the full resync (-want +got):\n%s", d)
	}
}

// TestFakeIPVSValidates checks that the fake refuses what the kernel refuses.
func TestFakeIPVSValidates(t *testing.T) {
	h := NewFakeIPVS()
	svc := &ipvs.Service{Address: []byte{10, 96, 0, 1}, Protocol: syscall.IPPROTO_TCP, Port: 80, SchedName: "rr", AddressFamily: syscall.AF_INET}
	dst := &ipvs.Destination{Address: []byte{10, 244, 1, 2}, Port: 8080, Weight: 1, AddressFamily: syscall.AF_INET}
	if err := h.NewDestination(svc, dst); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("real server on a missing virtual server: %v, want ESRCH", err)
	}
	if err := h.NewService(svc); err != nil {
		t.Fatal(err)
	}
	if err := h.NewService(svc); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("duplicate virtual server: %v, want EEXIST", err)
	}
	bad := *svc
	bad.SchedName = "fastest"
	if err := h.UpdateService(&bad); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), `"fastest"`) {
		t.Errorf("unknown scheduler: %v, want ENOENT naming it", err)
	}
	if err := h.NewDestination(svc, dst); err != nil {
		t.Fatal(err)
	}
	if err := h.NewDestination(svc, dst); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("duplicate real server: %v, want EEXIST", err)
	}
	neg := *dst
	neg.Weight = -1
	if err := h.UpdateDestination(svc, &neg); !errors.Is(err, syscall.ERANGE) {
		t.Errorf("negative weight: %v, want ERANGE", err)
	}
	other := *dst
	other.Port = 9
	if err := h.DelDestination(svc, &other); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("deleting a missing real server: %v, want ENOENT", err)
	}
	if err := h.DelService(svc); err != nil {
		t.Fatal(err)
	}
	if err := h.DelService(svc); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("deleting a missing virtual server: %v, want ESRCH", err)
	}
}

// TestIPVSSchedulerOption checks the default scheduler and the refusal of an unknown one.
func TestIPVSSchedulerOption(t *testing.T) {
	cfg := ProxierConfig{Config: DefaultConfig(testNode)}
	_, err := NewIPVSProxier(NewFakeIPVS(), cfg, IPVSOptions{Scheduler: "fastest", Device: NewFakeIPVSDevice(), Rules: &FakeIPVSRules{}})
	if err == nil || !strings.Contains(err.Error(), `unknown IPVS scheduler "fastest"`) || !strings.Contains(err.Error(), "rr, wrr, lc") {
		t.Errorf("unknown scheduler: %v", err)
	}
	for _, s := range IPVSSchedulers {
		f := newIPVSFixture(t, IPVSOptions{Scheduler: s})
		f.p.OnServiceAdd(makeService("demo", "web", "10.96.0.1", nil))
		f.sync(t)
		if !strings.Contains(f.h.Dump(), "TCP  10.96.0.1:80 "+s+"\n") {
			t.Errorf("scheduler %s: %s", s, f.h.Dump())
		}
	}
	f := newIPVSFixture(t, IPVSOptions{})
	if f.p.opts.Scheduler != "rr" {
		t.Errorf("default scheduler %q, want rr", f.p.opts.Scheduler)
	}
}

// TestIPVSSupported checks both detections and the error's wording.
func TestIPVSSupported(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "ip_vs")
	if err := os.WriteFile(present, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	noFamily := func() error { return syscall.ENOENT }
	if err := ipvsSupported(present, noFamily); err != nil {
		t.Errorf("with %s: %v", present, err)
	}
	missing := filepath.Join(dir, "none")
	if err := ipvsSupported(missing, func() error { return nil }); err != nil {
		t.Errorf("with the netlink family: %v", err)
	}
	err := ipvsSupported(missing, noFamily)
	for _, s := range []string{"kernel module ip_vs", missing + " does not exist", `generic netlink family "IPVS" is unknown`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not say %q", err, s)
		}
	}
	// This machine's kernel has no IP_VS (no /proc/net/ip_vs): the real check says so.
	if _, statErr := os.Stat(procIPVS); statErr != nil {
		if err := IPVSSupported(); err == nil || !strings.Contains(err.Error(), "ip_vs") {
			t.Errorf("IPVSSupported without %s: %v", procIPVS, err)
		}
	}
}

// TestCleanupIPVS checks that cleanup flushes virtual servers, deletes the device and
// the rules.
func TestCleanupIPVS(t *testing.T) {
	f := newIPVSFixture(t, IPVSOptions{})
	f.p.OnServiceAdd(makeService("demo", "web", "10.96.0.1", nil))
	f.sync(t)
	if err := cleanupIPVS(context.Background(), f.h, f.dev, f.rules); err != nil {
		t.Fatal(err)
	}
	if svcs, _ := f.h.GetServices(); len(svcs) != 0 {
		t.Errorf("%d virtual servers left", len(svcs))
	}
	if as, _ := f.dev.Addresses(); len(as) != 0 || f.dev.exists {
		t.Errorf("device left with %v", as)
	}
	if !f.rules.Cleaned || f.rules.IPTables != "" {
		t.Errorf("rules left")
	}
	if err := cleanupIPVS(context.Background(), nil, f.dev, f.rules); err != nil {
		t.Errorf("cleanup without IP_VS: %v", err)
	}
}

type ipvsHealthLog struct {
	last map[types.NamespacedName]ServiceHealth
}

func (h *ipvsHealthLog) Sync(m map[types.NamespacedName]ServiceHealth) error { h.last = m; return nil }

// TestIPVSHealthCheckNodePort checks that the ipvs mode serves healthCheckNodePorts as
// the nftables mode does.
func TestIPVSHealthCheckNodePort(t *testing.T) {
	hl := &ipvsHealthLog{}
	cfg := DefaultConfig(testNode)
	p, err := NewIPVSProxier(NewFakeIPVS(), ProxierConfig{Config: cfg, ServiceHealth: hl},
		IPVSOptions{NodeAddresses: []netip.Addr{nodeIP}, Device: NewFakeIPVSDevice(), Rules: &FakeIPVSRules{}})
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceAdd(makeService("demo", "loc", "10.96.0.50", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30050
		s.Spec.HealthCheckNodePort = 32000
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}))
	p.OnEndpointSliceAdd(makeSlice("demo", "loc", "loc-1", httpPorts, ready("10.244.1.3", testNode), ready("10.244.2.3", "node-b")))
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]ServiceHealth{{Namespace: "demo", Name: "loc"}: {Port: 32000, LocalEndpoints: 1}}
	if d := cmp.Diff(want, hl.last); d != "" {
		t.Errorf("health (-want +got):\n%s", d)
	}
}

// TestIPVSContestedVirtualServer checks that when two services ask for one virtual
// server the first by name keeps it, and the other gets it when the first lets go.
func TestIPVSContestedVirtualServer(t *testing.T) {
	f := newIPVSFixture(t, IPVSOptions{})
	withIP := func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.9"} }
	a := makeService("demo", "a", "10.96.0.1", withIP)
	f.p.OnServiceAdd(a)
	f.p.OnServiceAdd(makeService("demo", "b", "10.96.0.2", withIP))
	f.p.OnEndpointSliceAdd(makeSlice("demo", "a", "a-1", httpPorts, ready("10.244.1.1", testNode)))
	f.p.OnEndpointSliceAdd(makeSlice("demo", "b", "b-1", httpPorts, ready("10.244.2.2", "node-b")))
	f.sync(t)
	if !strings.Contains(f.h.Dump(), "TCP  192.0.2.9:80 rr\n  -> 10.244.1.1:8080") {
		t.Errorf("a does not own the external IP:\n%s", f.h.Dump())
	}
	f.p.OnServiceDelete(a)
	f.sync(t)
	if !strings.Contains(f.h.Dump(), "TCP  192.0.2.9:80 rr\n  -> 10.244.2.2:8080") {
		t.Errorf("b did not get the external IP:\n%s", f.h.Dump())
	}
	if as, _ := f.dev.Addresses(); !slices.Contains(as, netip.MustParseAddr("192.0.2.9")) {
		t.Errorf("the external IP left kube-ipvs0: %v", as)
	}
}

// TestFakeIPVSRulesValidates checks that the rules fake refuses what ipset and
// iptables-restore refuse, and that a refused restore changes nothing.
func TestFakeIPVSRulesValidates(t *testing.T) {
	ctx := context.Background()
	r := &FakeIPVSRules{}
	if err := r.RestoreIPSets(ctx, "create S hash:ip\nadd S 10.0.0.1\n"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"add T 10.0.0.2\n", "swap S T\n", "create S\n", "add S 10.0.0.2\nadd S\n"} {
		if err := r.RestoreIPSets(ctx, bad); err == nil {
			t.Errorf("ipset restore accepted %q", bad)
		}
	}
	if got := r.Members(); got != "" { // S is not one of the mode's sets: not listed
		t.Errorf("members %q", got)
	}
	if err := r.RestoreIPSets(ctx, "del S 10.0.0.1\n"); err != nil || len(r.sets["S"]) != 0 {
		t.Errorf("del: %v, left %v", err, r.sets["S"])
	}
	for _, bad := range []string{"*nat\n-A KUBE-X -j RETURN\nCOMMIT\n", "*nat\n:KUBE-X - [0:0]\n", ":KUBE-X - [0:0]\n", "*nat\nbogus\nCOMMIT\n"} {
		if err := r.RestoreIPTables(ctx, bad, nil); err == nil {
			t.Errorf("iptables-restore accepted %q", bad)
		}
	}
	if r.IPTables != "" {
		t.Errorf("a refused restore was kept: %q", r.IPTables)
	}
}

// TestIPVSRunRechecksDraining checks that Run, with no further event, comes back to a
// draining real server and deletes it once the kernel counts no connection.
func TestIPVSRunRechecksDraining(t *testing.T) {
	h := NewFakeIPVS()
	p, err := NewIPVSProxier(h, ProxierConfig{Config: DefaultConfig(testNode), RetryPeriod: 10 * time.Millisecond},
		IPVSOptions{NodeAddresses: []netip.Addr{nodeIP}, Device: NewFakeIPVSDevice(), Rules: &FakeIPVSRules{}})
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceAdd(makeService("demo", "web", "10.96.0.1", nil))
	s1 := makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	p.OnEndpointSliceAdd(s1)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.SetConnections("TCP", "10.96.0.1:80", "10.244.2.2:8080", 1, 0); err != nil {
		t.Fatal(err)
	}
	p.OnEndpointSliceUpdate(s1, makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(h.Dump()); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never %s:\n%s", what, h.Dump())
			}
		}
	}
	waitFor("drained at weight 0", func(d string) bool { return strings.Contains(d, "10.244.2.2:8080              Masq    0      1") })
	if err := h.SetConnections("TCP", "10.96.0.1:80", "10.244.2.2:8080", 0, 0); err != nil {
		t.Fatal(err)
	}
	waitFor("deleted", func(d string) bool { return !strings.Contains(d, "10.244.2.2") })
}

// TestIPVSCleanupPlanSparesSharedChains checks that cleaning up the ipvs mode deletes
// only the chains and jumps no other mode uses, and flushes every chain it declares.
func TestIPVSCleanupPlanSparesSharedChains(t *testing.T) {
	jumps, flush, del := ipvsCleanupPlan()
	var gotJumps []string
	for _, j := range jumps {
		gotJumps = append(gotJumps, j.Table+" "+j.Chain+" -> "+j.Target)
	}
	if d := cmp.Diff([]string{"filter INPUT -> KUBE-NODE-PORT", "filter INPUT -> KUBE-IPVS-FILTER"}, gotJumps); d != "" {
		t.Errorf("jumps deleted (-want +got):\n%s", d)
	}
	wantDel := [][2]string{{"nat", "KUBE-NODE-PORT"}, {"nat", "KUBE-LOAD-BALANCER"}, {"filter", "KUBE-NODE-PORT"},
		{"filter", "KUBE-SOURCE-RANGES-FIREWALL"}, {"filter", "KUBE-IPVS-FILTER"}}
	if d := cmp.Diff(wantDel, del); d != "" {
		t.Errorf("chains deleted (-want +got):\n%s", d)
	}
	if len(flush) != len(del)+len(ipvsSharedChains) {
		t.Errorf("flushed %v, want every declared chain", flush)
	}
}
