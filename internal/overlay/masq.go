package overlay

import (
	"context"
	"fmt"
	"net/netip"

	"sigs.k8s.io/knftables"
)

// MasqTable is the nftables table (family ip) holding the pod network's masquerade
// rule, flannel's --ip-masq: pods' traffic leaving the cluster's pod network goes out
// with the node's address, so that machines that route no pod subnet (an API server
// on a machine of its own, the LAN's router) can answer it.
const MasqTable = "tranche-overlay"

// masqRules returns the postrouting rules for cluster, the cluster's pod network:
// traffic between pods is left alone, traffic from a pod to anything else (multicast
// aside) is masqueraded.
func masqRules(cluster netip.Prefix) []string {
	c := cluster.Masked().String()
	return []string{
		fmt.Sprintf("ip saddr %s ip daddr %s return", c, c),
		fmt.Sprintf("ip saddr %s ip daddr != 224.0.0.0/4 masquerade fully-random", c),
	}
}

// ensureMasq writes MasqTable for cluster in one transaction: the table and its
// postrouting chain are created when missing and the chain's rules replaced, so a
// restarted agent leaves exactly one copy.
func ensureMasq(ctx context.Context, nft knftables.Interface, cluster netip.Prefix) error {
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("pod network masquerade (flannel's ip-masq)")})
	tx.Add(&knftables.Chain{Name: "postrouting", Type: knftables.PtrTo(knftables.NATType),
		Hook: knftables.PtrTo(knftables.PostroutingHook), Priority: knftables.PtrTo(knftables.SNATPriority)})
	tx.Flush(&knftables.Chain{Name: "postrouting"})
	for _, r := range masqRules(cluster) {
		tx.Add(&knftables.Rule{Chain: "postrouting", Rule: r})
	}
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("pod network masquerade (nftables table %s): %w", MasqTable, err)
	}
	return nil
}
