package proxy

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/netns"
	"github.com/tranche/tranche/internal/testutil"
)

// kernelProxier is a Proxier writing to the real kernel, in a network namespace of its
// own, next to one writing to a fake: both get the same events.
type kernelProxier struct {
	ns         string
	real, fake *Proxier
	nft        knftables.Interface
	fakeNFT    *knftables.Fake
}

func newKernelProxier(t *testing.T) *kernelProxier {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace and nft)")
	}
	ns := testutil.Netns(t, "kernel")
	k := &kernelProxier{ns: ns}
	var kernel *Kernel
	if err := netns.Do(ns, func() error {
		var err error
		kernel, err = NewKernel()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kernel.Close) // its nft -i, before the namespace goes
	k.nft = kernel
	k.restart(t)
	return k
}

// restart starts both proxies afresh, as an agent restart does: the real one over the
// table its predecessor left in the kernel, the fake one over an empty fake, which
// then holds what the kernel should once the leftovers are gone.
func (k *kernelProxier) restart(t *testing.T) {
	t.Helper()
	cfg := DefaultConfig(testNode)
	var err error
	if k.real, err = NewProxier(k.nft, ProxierConfig{Config: cfg, Registerer: prometheus.NewRegistry()}); err != nil {
		t.Fatal(err)
	}
	k.fakeNFT = knftables.NewFake(knftables.IPv4Family, TableName)
	if k.fake, err = NewProxier(k.fakeNFT, ProxierConfig{Config: cfg, Registerer: prometheus.NewRegistry()}); err != nil {
		t.Fatal(err)
	}
}

func (k *kernelProxier) service(old, cur *v1.Service) {
	k.real.OnServiceUpdate(old, cur)
	k.fake.OnServiceUpdate(old, cur)
}

func (k *kernelProxier) slice(s *discoveryv1.EndpointSlice, deleted bool) {
	if deleted {
		k.real.OnEndpointSliceDelete(s)
		k.fake.OnEndpointSliceDelete(s)
		return
	}
	k.real.OnEndpointSliceAdd(s)
	k.fake.OnEndpointSliceAdd(s)
}

// sync syncs both and compares them; the kernel's nft runs inside the namespace.
func (k *kernelProxier) sync(t *testing.T, step string) {
	t.Helper()
	k.syncOnly(t, step)
	k.compare(t, step)
}

func (k *kernelProxier) syncOnly(t *testing.T, step string) {
	t.Helper()
	if err := netns.Do(k.ns, func() error { return k.real.Sync(context.Background()) }); err != nil {
		t.Fatalf("%s: the kernel refused the sync: %v", step, err)
	}
	if err := k.fake.Sync(context.Background()); err != nil {
		t.Fatalf("%s: fake: %v", step, err)
	}
}

// compare checks that the kernel holds the same chains, sets and maps as the fake, and
// the same elements in each set and map.
func (k *kernelProxier) compare(t *testing.T, step string) {
	t.Helper()
	for _, kind := range []string{"chain", "set", "map"} {
		var got []string
		if err := netns.Do(k.ns, func() error {
			var err error
			got, err = k.nft.List(context.Background(), kind)
			return err
		}); err != nil {
			t.Fatalf("%s: listing %ss: %v", step, kind, err)
		}
		var want []string
		switch kind {
		case "chain":
			want = slices.Collect(maps.Keys(k.fakeNFT.Table.Chains))
		case "set":
			want = slices.Collect(maps.Keys(k.fakeNFT.Table.Sets))
		case "map":
			want = slices.Collect(maps.Keys(k.fakeNFT.Table.Maps))
		}
		slices.Sort(got)
		slices.Sort(want)
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%s: the kernel's %ss differ from the fake's (-fake +kernel):\n%s", step, kind, d)
		}
		if kind == "chain" {
			continue
		}
		for _, name := range want {
			k.compareElements(t, step, kind, name)
		}
	}
}

// compareElements checks that a set or map holds the same elements in the kernel as in
// the fake: Kernel writes them in grouped commands, the fake one by one.
func (k *kernelProxier) compareElements(t *testing.T, step, kind, name string) {
	t.Helper()
	render := func(els []*knftables.Element) []string {
		out := make([]string, len(els))
		for i, e := range els {
			out[i] = strings.Join(e.Key, " . ")
			if len(e.Value) > 0 {
				out[i] += " : " + strings.Join(e.Value, " . ")
			}
		}
		slices.Sort(out)
		return out
	}
	var kernel []*knftables.Element
	if err := netns.Do(k.ns, func() error {
		var err error
		kernel, err = k.nft.ListElements(context.Background(), kind, name)
		return err
	}); err != nil {
		t.Fatalf("%s: listing the elements of %s %s: %v", step, kind, name, err)
	}
	fake, err := k.fakeNFT.ListElements(context.Background(), kind, name)
	if err != nil {
		t.Fatalf("%s: fake: listing the elements of %s %s: %v", step, kind, name, err)
	}
	if d := cmp.Diff(render(fake), render(kernel)); d != "" {
		t.Fatalf("%s: the kernel's elements of %s %s differ from the fake's (-fake +kernel):\n%s", step, kind, name, d)
	}
}

// TestKernelAcceptsPartialSyncs drives the proxy through the changes that create, flush
// and delete per-service chains and sets (session affinity on and off, endpoints to
// zero and back, services removed) against the real kernel: every partial sync must be
// accepted as is (nft refuses, for instance, to delete a set a rule still uses), and the
// kernel must hold the same objects as the fake.
func TestKernelAcceptsPartialSyncs(t *testing.T) {
	k := newKernelProxier(t)
	udpPorts := []discoveryv1.EndpointPort{port("dns", 5353, v1.ProtocolUDP), port("dns-tcp", 5353, v1.ProtocolTCP)}
	dns := makeService("demo", "dns", "10.96.0.10", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}}
	})
	web := makeService("demo", "web", "10.96.0.20", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/16"}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.1"}}
	})
	sticky := func(on bool) *v1.Service {
		return makeService("demo", "web", "10.96.0.20", func(s *v1.Service) {
			*s = *web.DeepCopy()
			if on {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			}
		})
	}
	dnsSlice := makeSlice("demo", "dns", "dns-1", udpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	webSlice := func(ips ...string) *discoveryv1.EndpointSlice {
		var eps []ep
		for i, ip := range ips {
			eps = append(eps, ready(ip, []string{testNode, "node-b"}[i%2]))
		}
		return makeSlice("demo", "web", "web-1", httpPorts, eps...)
	}

	k.service(nil, dns)
	k.service(nil, web)
	k.slice(dnsSlice, false)
	k.slice(webSlice("10.244.1.5", "10.244.2.5"), false)
	k.sync(t, "first sync")
	k.service(web, sticky(true))
	k.sync(t, "affinity on")
	k.slice(webSlice("10.244.1.5", "10.244.2.5", "10.244.1.6"), false)
	k.sync(t, "affinity with one more endpoint")
	k.service(sticky(true), sticky(false))
	k.sync(t, "affinity off")
	k.service(sticky(false), sticky(true))
	k.sync(t, "affinity on again before the stale sets went")
	k.service(sticky(true), sticky(false))
	k.sync(t, "affinity off again")
	k.slice(dnsSlice, true)
	k.sync(t, "dns without endpoints")
	k.slice(dnsSlice, false)
	k.sync(t, "dns endpoints back")
	k.service(dns, nil)
	k.sync(t, "dns deleted")
	k.sync(t, "stale objects deleted")
	k.service(sticky(false), nil)
	k.slice(webSlice(), true)
	k.sync(t, "everything deleted")
	k.sync(t, "stale objects deleted again")
}

// TestKernelFullSyncOverExistingTable restarts the proxy over the table its previous
// run left, as an agent restart does: the first (full) sync must find the per-service
// chains and sets of services gone meanwhile (Kernel.List), flush them, and the next
// sync delete them, leaving the kernel as a fresh proxy's fake.
func TestKernelFullSyncOverExistingTable(t *testing.T) {
	k := newKernelProxier(t)
	dns := makeService("demo", "dns", "10.96.0.10", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
	})
	dnsSlice := makeSlice("demo", "dns", "dns-1", []discoveryv1.EndpointPort{port("dns", 5353, v1.ProtocolUDP)},
		ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	web := makeService("demo", "web", "10.96.0.20", func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	})
	webSlice := makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.5", testNode), ready("10.244.2.5", "node-b"))
	k.service(nil, dns)
	k.slice(dnsSlice, false)
	k.service(nil, web)
	k.slice(webSlice, false)
	k.sync(t, "first run")
	webChain := clusterChainName(ServicePortName{NamespacedName: types.NamespacedName{Namespace: "demo", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP})
	if k.fakeNFT.Table.Chains[webChain] == nil {
		t.Fatalf("test setup: web has no chain %s", webChain)
	}

	k.restart(t)
	k.service(nil, dns)
	k.slice(dnsSlice, false)
	k.syncOnly(t, "restarted without web")
	var rules []*knftables.Rule
	if err := netns.Do(k.ns, func() error {
		var err error
		rules, err = k.nft.ListRules(context.Background(), webChain)
		return err
	}); err != nil {
		t.Fatalf("web's chain should be kept, flushed, for one sync: %v", err)
	}
	if len(rules) != 0 {
		t.Errorf("the full sync left web's chain %s with %d rules", webChain, len(rules))
	}
	k.sync(t, "leftovers deleted")
}

// TestKernelServiceWithHundredsOfPorts: the real kernel takes a NodePort Service of 500
// ports (1,000 chains of its own) in one sync, and its removal: many ports are no bad
// input.
func TestKernelServiceWithHundredsOfPorts(t *testing.T) {
	k := newKernelProxier(t)
	big, slice := hundredsOfPorts(500)
	k.service(nil, big)
	k.slice(slice, false)
	k.service(nil, refWeb)
	k.slice(refWebSlice, false)
	k.sync(t, "500 ports")
	k.service(big, nil)
	k.slice(slice, true)
	k.sync(t, "deleted")
	k.sync(t, "stale objects deleted")
}

// TestKernelCheckWritesNothing: Kernel's dry run (what isolating a refused service
// relies on) accepts a valid plan and refuses an invalid one with nft's error, and
// leaves the kernel's table as it was either way.
func TestKernelCheckWritesNothing(t *testing.T) {
	k := newKernelProxier(t)
	k.service(nil, refWeb)
	k.slice(refWebSlice, false)
	k.sync(t, "web")
	kernel, ok := k.nft.(*Kernel)
	if !ok {
		t.Fatalf("the kernel proxier writes through %T, not a Kernel", k.nft)
	}
	st := k.real.st.clone()
	cfg := k.real.cfg.Config
	dns := buildService(cfg, servicePorts(refDNS), map[ServicePortName][]Endpoint{
		{NamespacedName: types.NamespacedName{Namespace: "demo", Name: "dns"}, Port: "dns", Protocol: v1.ProtocolUDP}: {
			{IP: mustAddr("10.244.1.3"), Port: 5353, Ready: true, Serving: true, NodeName: testNode}},
	})
	valid := planSync(cfg, st, map[types.NamespacedName]*serviceRules{{Namespace: "demo", Name: "dns"}: dns}, nil)
	invalid := &syncPlan{adds: []elemOp{{elemKey{serviceIPsMap, "10.96.0.99 . tcp . 80"}, "goto no-such-chain"}}}
	for _, c := range []struct {
		name string
		pl   *syncPlan
		ok   bool
	}{{"valid", valid, true}, {"invalid", invalid, false}} {
		err := netns.Do(k.ns, func() error { return kernel.checkPlan(context.Background(), c.pl) })
		if c.ok && err != nil {
			t.Errorf("%s plan refused: %v", c.name, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "no-such-chain")) {
			t.Errorf("%s plan: %v, want nft's error quoting the refused line", c.name, err)
		}
		k.compare(t, c.name+" plan checked")
	}
}
