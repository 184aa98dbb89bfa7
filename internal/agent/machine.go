package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/agent/node"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/netns"
)

// MachinePrefix starts the names of a machine's network namespaces (below /run/netns):
// the one the agent runs in, named MachinePrefix+node, and its pods'. It differs from
// `tranche up`'s "tr-", so `tranche down` on the same host never takes them for its own.
const MachinePrefix = "tranche-"

// TakeHostNetworkFlag is the flag that lets the agent make the host's root network
// namespace its node.
const TakeHostNetworkFlag = "--take-host-network"

// NodeIPFor returns the address this machine sends from to reach server (a URL), which
// kubelet would pick as the node's InternalIP: the address of the route to it. No
// packet is sent.
func NodeIPFor(server string) (netip.Addr, error) {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return netip.Addr{}, fmt.Errorf("server %q: want https://HOST:PORT", server)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	c, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("finding this machine's address towards %s: %w", u.Host, err)
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr().Unmap(), nil
}

// interfacePrefix is the subnet of the interface that holds ip.
func interfacePrefix(ip netip.Addr) (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, err
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(n.String())
		if err == nil && p.Addr().Unmap() == ip {
			return netip.PrefixFrom(ip, p.Bits()).Masked(), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no interface of this machine holds the node address %s (--node-ip)", ip)
}

// machineTopology makes the network namespace the agent runs in the node's, as
// kubelet, kube-proxy and flannel take their machine's: it names it MachinePrefix+node
// (refusing the host's root namespace unless takeHost), registers the Node with
// nodeIP, waits for node IPAM to give it spec.podCIDR, and prepares the namespace as a
// node (sysctls, lo, the pod bridge). The topology it returns holds that one node.
func machineTopology(ctx context.Context, cfg NodeConfig, log *slog.Logger) (clusternet.Topology, error) {
	name := MachinePrefix + cfg.NodeName
	if err := netns.Adopt(name, cfg.TakeHostNetwork); err != nil {
		if errors.Is(err, netns.ErrRootNamespace) {
			return clusternet.Topology{}, fmt.Errorf("%w: the agent makes the network namespace it runs in its node (pod bridge %s, veths, routes, nftables rules); "+
				"pass %s on a machine that is to be the node, or run the agent in a network namespace of its own", err, clusternet.PodBridge, TakeHostNetworkFlag)
		}
		return clusternet.Topology{}, err
	}
	underlay, err := interfacePrefix(cfg.NodeIP)
	if err != nil {
		return clusternet.Topology{}, err
	}
	if underlay.Bits() > 30 {
		underlay = netip.PrefixFrom(cfg.NodeIP, 30).Masked()
	}
	if _, err := node.New(node.Config{Name: cfg.NodeName, InternalIP: cfg.NodeIP.String(), Zone: cfg.Zone, Logger: log}, cfg.Client).Register(ctx); err != nil {
		return clusternet.Topology{}, err
	}
	var podCIDR netip.Prefix
	for logged := false; ; {
		n, err := cfg.Client.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
		if err == nil && n.Spec.PodCIDR != "" {
			if podCIDR, err = netip.ParsePrefix(n.Spec.PodCIDR); err != nil {
				return clusternet.Topology{}, fmt.Errorf("node %s: spec.podCIDR: %w", cfg.NodeName, err)
			}
			break
		}
		if !logged {
			log.Info("waiting for the node IPAM controller to give the node spec.podCIDR")
			logged = true
		}
		select {
		case <-ctx.Done():
			return clusternet.Topology{}, context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
	t := clusternet.Topology{Prefix: MachinePrefix, UnderlayCIDR: underlay, APIAddress: otherHost(underlay, cfg.NodeIP), ClusterCIDR: cfg.ClusterCIDR,
		Nodes: []clusternet.Node{{Name: cfg.NodeName, Underlay: cfg.NodeIP, PodCIDR: podCIDR}}}
	if err := clusternet.PrepareNode(t, cfg.NodeName); err != nil {
		return clusternet.Topology{}, err
	}
	return t, nil
}

// otherHost is a host address of p other than ip: the topology wants one for the
// underlay's own address, which a machine's agent does not use.
func otherHost(p netip.Prefix, ip netip.Addr) netip.Addr {
	a := p.Masked().Addr().Next()
	if a == ip {
		a = a.Next()
	}
	return a
}
