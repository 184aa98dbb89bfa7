package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// MaxLinkName is the longest interface name the kernel accepts (IFNAMSIZ - 1).
const MaxLinkName = 15

// Links changes the links, addresses and routes of one network namespace through a netlink
// socket that lives there (see OpenLinks). Link names are names inside that namespace.
// A Links is not safe for concurrent use.
type Links struct {
	ns string
	h  *netlink.Handle
}

// Close releases the netlink socket.
func (l *Links) Close() {
	l.h.Close()
}

func (l *Links) link(name string) (netlink.Link, error) {
	lk, err := l.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %q in network namespace %q: %w", name, l.ns, err)
	}
	return lk, nil
}

func checkLinkName(name string) error {
	if name == "" || len(name) > MaxLinkName {
		return fmt.Errorf("link name %q must have 1 to %d characters", name, MaxLinkName)
	}
	return nil
}

// LinkExists reports whether a link with that name is in the namespace.
func (l *Links) LinkExists(name string) (bool, error) {
	_, err := l.h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("link %q in network namespace %q: %w", name, l.ns, err)
	}
	return true, nil
}

// AddBridge creates a bridge, gives it addr when addr is valid, and sets it up. A non-nil
// mac is the bridge's MAC address for good: without one the kernel gives the bridge the
// lowest MAC of its ports, which changes when that port goes, and every neighbour that
// routes through the bridge's address keeps sending to the old MAC until its ARP entry
// fails.
func (l *Links) AddBridge(name string, addr netip.Prefix, mac net.HardwareAddr) error {
	if err := checkLinkName(name); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac}}
	if err := l.h.LinkAdd(br); err != nil {
		return fmt.Errorf("creating bridge %q in network namespace %q: %w", name, l.ns, err)
	}
	if addr.IsValid() {
		if err := l.AddAddr(name, addr); err != nil {
			return err
		}
	}
	return l.SetUp(name)
}

// AddVeth creates a veth pair: name in this namespace, peer directly in namespace peerNS
// (never passing through another one). Both ends are down. Deleting either end deletes
// both.
func (l *Links) AddVeth(name, peer, peerNS string) error {
	if err := checkLinkName(name); err != nil {
		return err
	}
	if err := checkLinkName(peer); err != nil {
		return err
	}
	f, err := open(peerNS)
	if err != nil {
		return err
	}
	defer f.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name},
		PeerName:      peer,
		PeerNamespace: netlink.NsFd(f.Fd()),
	}
	if err := l.h.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %q in network namespace %q with peer %q in %q: %w", name, l.ns, peer, peerNS, err)
	}
	return nil
}

// AttachToBridge makes link a port of bridge with hairpin mode on (the bridge may send a
// frame back out of the port it came in by, so a pod can reach itself through a Service
// address) and sets the link up.
func (l *Links) AttachToBridge(link, bridge string) error {
	lk, err := l.link(link)
	if err != nil {
		return err
	}
	br, err := l.link(bridge)
	if err != nil {
		return err
	}
	if err := l.h.LinkSetMaster(lk, br); err != nil {
		return fmt.Errorf("attaching %q to bridge %q in network namespace %q: %w", link, bridge, l.ns, err)
	}
	if err := l.h.LinkSetHairpin(lk, true); err != nil {
		return fmt.Errorf("setting hairpin mode on %q in network namespace %q: %w", link, l.ns, err)
	}
	return l.SetUp(link)
}

// SetMTU sets a link's MTU.
func (l *Links) SetMTU(link string, mtu int) error {
	lk, err := l.link(link)
	if err != nil {
		return err
	}
	if err := l.h.LinkSetMTU(lk, mtu); err != nil {
		return fmt.Errorf("setting MTU %d on %q in network namespace %q: %w", mtu, link, l.ns, err)
	}
	return nil
}

// SetUp sets a link administratively up.
func (l *Links) SetUp(link string) error {
	lk, err := l.link(link)
	if err != nil {
		return err
	}
	if err := l.h.LinkSetUp(lk); err != nil {
		return fmt.Errorf("setting %q up in network namespace %q: %w", link, l.ns, err)
	}
	return nil
}

// LoUp sets the loopback interface up (a new namespace starts with lo down).
func (l *Links) LoUp() error {
	return l.SetUp("lo")
}

// AddAddr adds addr (address and prefix length, e.g. 10.244.0.1/24) to link; an address
// already present is not an error.
func (l *Links) AddAddr(link string, addr netip.Prefix) error {
	return l.addAddr(link, addr, 0)
}

// AddAddrNoPrefixRoute is AddAddr without the route to the address's subnet that the
// kernel would add (`ip addr add ... noprefixroute`): the address keeps its prefix
// length for everyone reading it, but only explicit routes decide what is reachable
// directly on the link.
func (l *Links) AddAddrNoPrefixRoute(link string, addr netip.Prefix) error {
	return l.addAddr(link, addr, unix.IFA_F_NOPREFIXROUTE)
}

func (l *Links) addAddr(link string, addr netip.Prefix, flags int) error {
	lk, err := l.link(link)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: &net.IPNet{
		IP:   addr.Addr().AsSlice(),
		Mask: net.CIDRMask(addr.Bits(), addr.Addr().BitLen()),
	}, Flags: flags}
	if err := l.h.AddrAdd(lk, a); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("adding address %s to %q in network namespace %q: %w", addr, link, l.ns, err)
	}
	return nil
}

// AddRoute routes dst via gateway via out of dev (a zero dst prefix length means the
// default route), replacing any route to the same dst, so applying a plan twice is
// harmless. With no via (the zero Addr) dst is directly on dev (scope link).
func (l *Links) AddRoute(dst netip.Prefix, via netip.Addr, dev string) error {
	lk, err := l.link(dev)
	if err != nil {
		return err
	}
	r := &netlink.Route{LinkIndex: lk.Attrs().Index}
	route := fmt.Sprintf("%s dev %s scope link", dst, dev)
	if via.IsValid() {
		r.Gw = via.AsSlice()
		route = fmt.Sprintf("%s via %s dev %s", dst, via, dev)
	} else {
		r.Scope = netlink.SCOPE_LINK
	}
	if dst.Bits() > 0 {
		r.Dst = prefixNet(dst)
	}
	if err := l.h.RouteReplace(r); err != nil {
		return fmt.Errorf("adding route %s in network namespace %q: %w", route, l.ns, err)
	}
	return nil
}

// DelRoute removes the route to dst; a missing route is not an error.
func (l *Links) DelRoute(dst netip.Prefix) error {
	r := &netlink.Route{Dst: prefixNet(dst)}
	if err := l.h.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("deleting route %s in network namespace %q: %w", dst, l.ns, err)
	}
	return nil
}

// DelLink deletes a link (for a veth, both ends); a missing link is not an error.
func (l *Links) DelLink(name string) error {
	lk, err := l.h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %q in network namespace %q: %w", name, l.ns, err)
	}
	if err := l.h.LinkDel(lk); err != nil {
		return fmt.Errorf("deleting link %q in network namespace %q: %w", name, l.ns, err)
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
