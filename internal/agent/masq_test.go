package agent

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

func TestEnsureIPMasq(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, MasqTable)
	for range 2 { // applying it again changes nothing
		if err := ensureIPMasq(context.Background(), nft, netip.MustParsePrefix("10.244.0.0/16")); err != nil {
			t.Fatal(err)
		}
	}
	want := `add table ip tranche-ipmasq { comment "pod traffic leaving the pod network, as flannel's ip-masq" ; }
add chain ip tranche-ipmasq postrouting { type nat hook postrouting priority 100 ; }
add rule ip tranche-ipmasq postrouting ip saddr 10.244.0.0/16 ip daddr 10.244.0.0/16 return
add rule ip tranche-ipmasq postrouting ip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade fully-random
`
	if d := cmp.Diff(strings.TrimSpace(want), strings.TrimSpace(nft.Dump())); d != "" {
		t.Errorf("rules (-want +got):\n%s", d)
	}
}
