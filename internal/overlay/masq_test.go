package overlay

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// TestMasq: pods' traffic leaving the pod network is masqueraded, pod-to-pod traffic
// is not, and writing the table again (a restarted agent) leaves one copy of the rules.
func TestMasq(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, MasqTable)
	for range 2 {
		if err := ensureMasq(context.Background(), nft, netip.MustParsePrefix("10.244.3.7/16")); err != nil {
			t.Fatal(err)
		}
	}
	want := `add table ip tranche-overlay { comment "pod network masquerade (flannel's ip-masq)" ; }
add chain ip tranche-overlay postrouting { type nat hook postrouting priority 100 ; }
add rule ip tranche-overlay postrouting ip saddr 10.244.0.0/16 ip daddr 10.244.0.0/16 return
add rule ip tranche-overlay postrouting ip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random
`
	if d := cmp.Diff(want, nft.Dump()); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
}

// TestPrepareWritesMasq: Prepare writes the masquerade table when it has the cluster's
// pod network, and not without it.
func TestPrepareWritesMasq(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster netip.Prefix
		want    bool
	}{
		{"with the pod network", netip.MustParsePrefix("10.244.0.0/16"), true},
		{"without", netip.Prefix{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nft := knftables.NewFake(knftables.IPv4Family, MasqTable)
			_, err := Prepare(Config{Backend: BackendHostGW, NodeName: "a", PublicIP: netip.MustParseAddr("192.168.50.10"),
				PodCIDR: netip.MustParsePrefix("10.244.1.0/24"), Dataplane: newFake(),
				ClusterCIDR: tc.cluster, NFT: nft})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(nft.Dump(), "masquerade"); got != tc.want {
				t.Errorf("masquerade rule written: %v, want %v:\n%s", got, tc.want, nft.Dump())
			}
		})
	}
}
