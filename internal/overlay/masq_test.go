package overlay

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

const wantTable = `add table ip tranche-overlay { comment "pod network across machines: masquerade (flannel's ip-masq), VXLAN untracked" ; }
`

const wantMasqChain = `add chain ip tranche-overlay postrouting { type nat hook postrouting priority 100 ; }
`

const wantMasqRules = `add rule ip tranche-overlay postrouting ip saddr 10.244.0.0/16 ip daddr 10.244.0.0/16 return
add rule ip tranche-overlay postrouting ip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random
`

const wantNotrackChains = `add chain ip tranche-overlay raw-output { type filter hook output priority -300 ; }
add chain ip tranche-overlay raw-prerouting { type filter hook prerouting priority -300 ; }
`

const wantNotrackRules = `add rule ip tranche-overlay raw-output ip saddr 192.168.50.10 udp dport 8472 notrack
add rule ip tranche-overlay raw-prerouting ip daddr 192.168.50.10 udp dport 8472 notrack
`

// TestMasq: pods' traffic leaving the pod network is masqueraded, pod-to-pod traffic
// is not, and writing the table again (a restarted agent) leaves one copy of the rules.
func TestMasq(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, MasqTable)
	for range 2 {
		if err := ensureTable(context.Background(), nft, netip.MustParsePrefix("10.244.3.7/16"), netip.Addr{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(wantTable+wantMasqChain+wantMasqRules, nft.Dump()); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
}

// TestNotrack: with vxlan, the VXLAN packets the node receives and sends are left
// untracked, written once however often the table is written; a node that then runs
// host-gw (no VXLAN address) loses those chains and keeps its masquerade.
func TestNotrack(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, MasqTable)
	cluster, local := netip.MustParsePrefix("10.244.0.0/16"), netip.MustParseAddr("192.168.50.10")
	for range 2 {
		if err := ensureTable(context.Background(), nft, cluster, local); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(wantTable+wantMasqChain+wantNotrackChains+wantMasqRules+wantNotrackRules, nft.Dump()); d != "" {
		t.Errorf("vxlan table (-want +got):\n%s", d)
	}
	if err := ensureTable(context.Background(), nft, cluster, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantTable+wantMasqChain+wantMasqRules, nft.Dump()); d != "" {
		t.Errorf("table after host-gw (-want +got):\n%s", d)
	}
}

// TestPrepareWritesTable: Prepare writes the masquerade when it has the cluster's pod
// network, and the VXLAN notrack rules with vxlan, each only then.
func TestPrepareWritesTable(t *testing.T) {
	for _, tc := range []struct {
		name, backend string
		cluster       netip.Prefix
		masq, notrack bool
	}{
		{"host-gw with the pod network", BackendHostGW, netip.MustParsePrefix("10.244.0.0/16"), true, false},
		{"host-gw without", BackendHostGW, netip.Prefix{}, false, false},
		{"vxlan with the pod network", BackendVXLAN, netip.MustParsePrefix("10.244.0.0/16"), true, true},
		{"vxlan without", BackendVXLAN, netip.Prefix{}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nft := knftables.NewFake(knftables.IPv4Family, MasqTable)
			_, err := Prepare(Config{Backend: tc.backend, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
				PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Dataplane: newFake(),
				ClusterCIDR: tc.cluster, NFT: nft})
			if err != nil {
				t.Fatal(err)
			}
			dump := nft.Dump()
			if got := strings.Contains(dump, "masquerade fully-random"); got != tc.masq {
				t.Errorf("masquerade rule written: %v, want %v:\n%s", got, tc.masq, dump)
			}
			if got := strings.Contains(dump, "ip daddr 192.168.50.10 udp dport 8472 notrack"); got != tc.notrack {
				t.Errorf("notrack rule written: %v, want %v:\n%s", got, tc.notrack, dump)
			}
		})
	}
}

// TestPrepareNeedsNFT: with a table to write and no nftables interface, Prepare fails
// instead of writing into the namespace it runs in (a unit test's is the host's).
func TestPrepareNeedsNFT(t *testing.T) {
	_, err := Prepare(Config{Backend: BackendVXLAN, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
		PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Dataplane: newFake()})
	if err == nil || !strings.Contains(err.Error(), "no nftables interface") {
		t.Fatalf("Prepare without NFT: %v, want an error naming it", err)
	}
	if _, err := Prepare(Config{Backend: BackendHostGW, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
		PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Dataplane: newFake()}); err != nil {
		t.Fatalf("host-gw without the pod network has no table to write: %v", err)
	}
}
