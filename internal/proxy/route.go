package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// ensureServiceRoute makes the service CIDR routable in the current network namespace.
// The kernel looks a route up before the nat hooks of the node's own traffic and before
// the forward hook of its pods' traffic, so without one a ClusterIP answers "network
// unreachable" instead of being translated, rejected or dropped by the table. Machines
// have a default route; tranche's node namespaces do not, so when no route covers the
// CIDR one is added through the interface holding nodeIP. No packet follows it out:
// every packet to the CIDR is translated, rejected or dropped by the table first.
// It reports whether it added the route.
func ensureServiceRoute(cidr netip.Prefix, nodeIP netip.Addr) (bool, error) {
	first := cidr.Masked().Addr().Next()
	if _, err := netlink.RouteGet(net.IP(first.AsSlice())); err == nil {
		return false, nil
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return false, fmt.Errorf("service CIDR %s: listing addresses: %w", cidr, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap() != nodeIP {
			continue
		}
		r := &netlink.Route{
			LinkIndex: a.LinkIndex,
			Dst:       &net.IPNet{IP: net.IP(cidr.Masked().Addr().AsSlice()), Mask: net.CIDRMask(cidr.Bits(), 32)},
			Scope:     netlink.SCOPE_LINK,
		}
		if err := netlink.RouteAdd(r); err != nil {
			return false, fmt.Errorf("service CIDR %s: adding a route through the interface of %s: %w", cidr, nodeIP, err)
		}
		return true, nil
	}
	return false, errors.New("service CIDR " + cidr.String() + " has no route and no interface holds the node address " + nodeIP.String())
}
