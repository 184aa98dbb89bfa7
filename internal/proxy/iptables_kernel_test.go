package proxy

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// TestIPTablesKernelRestore applies the generated rules with the real iptables-restore
// in a network namespace of its own (never the host's): a full sync, then a partial
// one after an endpoint change, then the cleanup.
func TestIPTablesKernelRestore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace and iptables)")
	}
	ns := testutil.Netns(t, "ipt")
	in := func(step string, fn func() error) {
		t.Helper()
		if err := netns.Do(ns, fn); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	ctx := context.Background()
	var k *IPTablesKernel
	in("finding iptables", func() (err error) { k, err = NewIPTablesKernel(); return err })
	p, err := NewIPTablesProxier(k, ProxierConfig{Config: DefaultConfig(testNode), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	save := func(table string) string {
		t.Helper()
		var out []byte
		in("iptables-save", func() (err error) { out, err = k.Save(ctx, table); return err })
		return string(out)
	}
	p.OnServiceAdd(makeService("demo", "web", "10.96.0.20", nil))
	p.OnEndpointSliceAdd(makeSlice("demo", "web", "web-1", httpPorts,
		ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"), ready("10.244.3.2", "node-c")))
	p.OnServiceAdd(makeService("demo", "empty", "10.96.0.21", nil))
	p.OnServiceAdd(makeService("demo", "sticky", "10.96.0.22", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }))
	p.OnEndpointSliceAdd(makeSlice("demo", "sticky", "sticky-1", httpPorts, ready("10.244.1.5", testNode), ready("10.244.2.5", "node-b")))
	in("full sync", func() error { return p.Sync(ctx) })
	nat := save("nat")
	for _, want := range []string{":KUBE-SERVICES", "-A PREROUTING", "-j KUBE-SERVICES", "--mode random --probability 0.33333333", "--to-destination 10.244.3.2:8080"} {
		if !strings.Contains(nat, want) {
			t.Errorf("iptables-save -t nat lacks %q:\n%s", want, nat)
		}
	}
	if filter := save("filter"); !strings.Contains(filter, "10.96.0.21") || !strings.Contains(filter, "REJECT") {
		t.Errorf("iptables-save -t filter lacks the reject of the service without endpoints:\n%s", filter)
	}

	p.OnEndpointSliceUpdate(nil, makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b")))
	in("partial sync", func() error { return p.Sync(ctx) })
	nat = save("nat")
	gone := iptEndpointChainName("demo/web:http", "tcp", "10.244.3.2:8080")
	if strings.Contains(nat, gone) || !strings.Contains(nat, "--probability 0.5") {
		t.Errorf("after the partial sync, iptables-save -t nat:\n%s", nat)
	}
	if strings.Count(nat, "-j KUBE-SERVICES") != 2 {
		t.Errorf("jumps to KUBE-SERVICES duplicated or missing:\n%s", nat)
	}
	// A second full sync over the kernel's tables adds no second jump.
	p.needFull = true
	in("second full sync", func() error { return p.Sync(ctx) })
	if nat = save("nat"); strings.Count(nat, "-j KUBE-SERVICES") != 2 {
		t.Errorf("jumps to KUBE-SERVICES after a second full sync:\n%s", nat)
	}

	// The kernel's own rendering of the rules walks like the generated text.
	walked := NewFakeIPTables()
	for _, table := range []string{"filter", "nat"} {
		if err := walked.Restore(ctx, []byte(save(table))); err != nil {
			t.Fatalf("loading iptables-save -t %s into the fake: %v", table, err)
		}
	}
	w := &iptWalker{f: walked, local: []netip.Addr{nodeIP}}
	for _, c := range []traceCase{
		{pkt("10.244.1.9", "10.96.0.20", "tcp", 80), "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080"},
		{pkt("10.240.0.9", "10.96.0.20", "tcp", 80), "accept dnat 10.244.1.2:8080 masquerade | accept dnat 10.244.2.2:8080 masquerade"},
		{pkt("10.244.1.9", "10.96.0.21", "tcp", 80), "reject tcp-reset"},
		{pkt("10.244.1.9", "10.96.0.22", "tcp", 80), "accept dnat 10.244.1.5:8080 | accept dnat 10.244.2.5:8080"},
	} {
		if got, err := w.trace(c.pkt); err != nil || got != c.want {
			t.Errorf("walking the kernel's rules %v -> %v: got %s (%v), want %s", c.pkt.Src, c.pkt.Dst, got, err, c.want)
		}
	}

	// --test validates without writing, and refuses what iptables-restore cannot load.
	in("check", func() error {
		return k.Check(ctx, []byte("*nat\n:KUBE-CHECK-ONLY - [0:0]\n-A KUBE-CHECK-ONLY -j ACCEPT\nCOMMIT\n"))
	})
	if strings.Contains(save("nat"), "KUBE-CHECK-ONLY") {
		t.Error("iptables-restore --test wrote a chain")
	}
	if err := netns.Do(ns, func() error {
		return k.Check(ctx, []byte("*nat\n:KUBE-CHECK-ONLY - [0:0]\n-A KUBE-CHECK-ONLY -m nosuchmatch -j ACCEPT\nCOMMIT\n"))
	}); err == nil {
		t.Error("iptables-restore --test accepted an unknown match")
	}

	in("cleanup", func() error { return CleanupIPTables(ctx, k) })
	for _, table := range []string{"filter", "nat"} {
		if out := save(table); strings.Contains(out, "KUBE-") {
			t.Errorf("after cleanup, iptables-save -t %s:\n%s", table, out)
		}
	}
}
