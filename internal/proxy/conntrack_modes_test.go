package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"
)

// TestUDPConntrackEveryMode checks that in each of the three modes an endpoint a UDP
// service stops using has its conntrack entries deleted (its ClusterIP and NodePort
// frontends), that a service gaining its first endpoints has the entries of its
// untranslated (rejected) packets deleted, and that nothing is deleted while the
// endpoints stay.
func TestUDPConntrackEveryMode(t *testing.T) {
	modes := map[string]func(ProxierConfig) (ModeProxier, error){
		ModeNFTables: func(cfg ProxierConfig) (ModeProxier, error) {
			return NewProxier(knftables.NewFake(knftables.IPv4Family, TableName), cfg)
		},
		ModeIPTables: func(cfg ProxierConfig) (ModeProxier, error) {
			return NewIPTablesProxier(NewFakeIPTables(), cfg)
		},
		ModeIPVS: func(cfg ProxierConfig) (ModeProxier, error) {
			return NewIPVSProxier(NewFakeIPVS(), cfg, IPVSOptions{NodeAddresses: []netip.Addr{nodeIP},
				Device: NewFakeIPVSDevice(), Rules: &FakeIPVSRules{}})
		},
	}
	for mode, newProxier := range modes {
		t.Run(mode, func(t *testing.T) {
			ct := &recordingConntrack{}
			p, err := newProxier(ProxierConfig{Config: DefaultConfig(testNode), Conntrack: ct})
			if err != nil {
				t.Fatal(err)
			}
			sync := func() {
				t.Helper()
				if err := p.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			dnsPorts := []discoveryv1.EndpointPort{port("dns", 5353, v1.ProtocolUDP)}
			p.OnServiceAdd(makeService("demo", "dns", "10.96.0.10", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}}
			}))
			p.OnEndpointSliceAdd(makeSlice("demo", "dns", "dns-1", dnsPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b")))
			sync()
			if got, want := fmt.Sprint(ct.flows), "[udp 10.96.0.10:53 untranslated udp *:30053 untranslated]"; got != want {
				t.Errorf("first sync deleted %s, want %s", got, want)
			}
			ct.flows = nil
			p.OnEndpointSliceUpdate(nil, makeSlice("demo", "dns", "dns-1", dnsPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b")))
			sync()
			if len(ct.flows) != 0 {
				t.Errorf("an unchanged endpoint set deleted %v", ct.flows)
			}
			ct.flows = nil
			p.OnEndpointSliceUpdate(nil, makeSlice("demo", "dns", "dns-1", dnsPorts, ready("10.244.1.2", testNode)))
			sync()
			if got, want := fmt.Sprint(ct.flows), "[udp 10.96.0.10:53 dnat 10.244.2.2:5353 udp *:30053 dnat 10.244.2.2:5353]"; got != want {
				t.Errorf("stale flows %s, want %s", got, want)
			}
		})
	}
}
