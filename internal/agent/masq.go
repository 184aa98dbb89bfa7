package agent

import (
	"context"
	"fmt"
	"net/netip"

	"sigs.k8s.io/knftables"
)

// MasqTable is the nftables table (family ip) in which a machine's agent masquerades
// pod traffic leaving the pod network, as flannel's ip-masq does (its nftables
// backend's table flannel-ipv4).
const MasqTable = "tranche-ipmasq"

// ensureIPMasq writes, in one transaction, flannel's ip-masq rules for the pod network
// clusterCIDR: traffic from a pod to another pod keeps its addresses; traffic from a
// pod to anything else (another machine, the API servers, the world) leaves with the
// node's address, so that machines which do not route the pod network can answer it.
// Multicast is left alone. Applying it again replaces the chain's rules.
func ensureIPMasq(ctx context.Context, nft knftables.Interface, clusterCIDR netip.Prefix) error {
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("pod traffic leaving the pod network, as flannel's ip-masq")})
	tx.Add(&knftables.Chain{Name: "postrouting", Type: knftables.PtrTo(knftables.NATType),
		Hook: knftables.PtrTo(knftables.PostroutingHook), Priority: knftables.PtrTo(knftables.SNATPriority)})
	tx.Flush(&knftables.Chain{Name: "postrouting"})
	c := clusterCIDR.Masked().String()
	for _, r := range []string{
		"ip saddr " + c + " ip daddr " + c + " return",
		"ip saddr " + c + " ip daddr != 224.0.0.0/4 masquerade fully-random",
	} {
		tx.Add(&knftables.Rule{Chain: "postrouting", Rule: r})
	}
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("nftables table %s (pod traffic masquerading): %w", MasqTable, err)
	}
	return nil
}
