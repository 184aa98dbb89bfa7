package overlay

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"sigs.k8s.io/knftables"
)

// MasqTable is the nftables table (family ip) of the pod network across machines. It
// holds the pod network's masquerade rule, flannel's --ip-masq: pods' traffic leaving
// the cluster's pod network goes out with the node's address, so that machines that
// route no pod subnet (an API server on a machine of its own, the LAN's router) can
// answer it. With vxlan it also exempts the overlay's own VXLAN packets from connection
// tracking (notrackRules).
const MasqTable = "tranche-overlay"

// notrackChains are the raw-priority chains of MasqTable, by hook.
var notrackChains = []struct {
	name string
	hook knftables.BaseChainHook
}{{"raw-prerouting", knftables.PreroutingHook}, {"raw-output", knftables.OutputHook}}

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

// notrackRules returns, for the chains of notrackChains, the rules that leave the VXLAN
// packets a node with the address local receives (prerouting) and sends (output)
// untracked. Conntrack has nothing to do for them: no rule NATs or filters the
// overlay's UDP port by connection state, and the kernel's vxlan socket takes every
// packet to it whatever conntrack says. Tracked, each direction of a VXLAN flow is a
// separate unreplied UDP "connection" (the source port is a hash of the inner flow,
// the destination port always VXLANPort), so every packet counted as state new and
// ran the service proxy's new-connection checks (set lookups, a fib lookup) besides
// the conntrack lookup, once where it is sent and once where it arrives: per packet
// between pods across machines, on top of the inner packet's own tracking.
func notrackRules(local netip.Addr) []string {
	port := strconv.Itoa(VXLANPort)
	return []string{
		fmt.Sprintf("ip daddr %s udp dport %s notrack", local, port),
		fmt.Sprintf("ip saddr %s udp dport %s notrack", local, port),
	}
}

// ensureTable writes MasqTable in one transaction: with cluster (the cluster's pod
// network) valid, the masquerade in its postrouting chain; with vxlanLocal (the node's
// VXLAN address) valid, the notrack rules in the raw chains, which are removed when it
// is not (a node that went from vxlan to host-gw). Chains are created when missing and
// their rules replaced, so a restarted agent leaves exactly one copy.
func ensureTable(ctx context.Context, nft knftables.Interface, cluster netip.Prefix, vxlanLocal netip.Addr) error {
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("pod network across machines: masquerade (flannel's ip-masq), VXLAN untracked")})
	if cluster.IsValid() {
		tx.Add(&knftables.Chain{Name: "postrouting", Type: knftables.PtrTo(knftables.NATType),
			Hook: knftables.PtrTo(knftables.PostroutingHook), Priority: knftables.PtrTo(knftables.SNATPriority)})
		tx.Flush(&knftables.Chain{Name: "postrouting"})
		for _, r := range masqRules(cluster) {
			tx.Add(&knftables.Rule{Chain: "postrouting", Rule: r})
		}
	}
	var rules []string
	if vxlanLocal.IsValid() {
		rules = notrackRules(vxlanLocal)
	}
	for i, c := range notrackChains {
		ch := &knftables.Chain{Name: c.name, Type: knftables.PtrTo(knftables.FilterType),
			Hook: knftables.PtrTo(c.hook), Priority: knftables.PtrTo(knftables.RawPriority)}
		tx.Add(ch)
		tx.Flush(&knftables.Chain{Name: c.name})
		if rules == nil {
			tx.Delete(&knftables.Chain{Name: c.name})
			continue
		}
		tx.Add(&knftables.Rule{Chain: c.name, Rule: rules[i]})
	}
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("pod network across machines (nftables table %s): %w", MasqTable, err)
	}
	return nil
}
