package l2announce

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/netns"
)

// Dataplane holds announced addresses on a node's uplink. Netlink is the real one.
type Dataplane interface {
	// Held returns the addresses this package put on the uplink (labelled Label).
	Held() ([]netip.Addr, error)
	// Take adds addr as a /32 on the uplink (the kernel then answers ARP for it) and
	// sends gratuitous ARP for it, so that neighbours' caches move at once. The address
	// lives for AddressLifetime unless kept.
	Take(addr netip.Addr) error
	// Keep gives a held addr its whole lifetime again.
	Keep(addr netip.Addr) error
	// Release removes addr from the uplink.
	Release(addr netip.Addr) error
	// Announce sends gratuitous ARP for a held addr again.
	Announce(addr netip.Addr) error
}

// AddressLifetime is how long an announced address stays on the uplink unless the
// announcer keeps it (every AddressLifetime/3). The kernel removes it by itself after
// that, so a node whose agent was killed stops answering ARP for it within
// AddressLifetime, before (with the default grace period of 50 s) the node is
// NotReady and another node takes the address. An address without a lifetime would
// stay, and answer ARP beside its next holder, until someone removed it by hand.
const AddressLifetime = 15 * time.Second

// Label returns the address label marking announced addresses on uplink (an address
// label must begin with its link's name and fit in 15 bytes).
func Label(uplink string) (string, error) {
	l := uplink + ":lb"
	if len(l) > 15 {
		return "", fmt.Errorf("uplink name %q is too long to label announced addresses (%q > 15 bytes)", uplink, l)
	}
	return l, nil
}

// Netlink is the Dataplane of the uplink of a named network namespace.
type Netlink struct {
	ns, uplink, label string
	h                 *netlink.Handle
	// lifetime is the addresses' (AddressLifetime; tests shorten it).
	lifetime time.Duration
}

var _ Dataplane = (*Netlink)(nil)

// OpenNetlink opens the uplink of the named network namespace (/run/netns/NAME).
func OpenNetlink(ns, uplink string) (*Netlink, error) {
	label, err := Label(uplink)
	if err != nil {
		return nil, err
	}
	var h *netlink.Handle
	if err := netns.Do(ns, func() error {
		var err error
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	}); err != nil {
		return nil, fmt.Errorf("opening netlink in network namespace %q: %w", ns, err)
	}
	return &Netlink{ns: ns, uplink: uplink, label: label, h: h, lifetime: AddressLifetime}, nil
}

// Close releases the netlink socket.
func (n *Netlink) Close() { n.h.Close() }

func (n *Netlink) link() (netlink.Link, error) {
	lk, err := n.h.LinkByName(n.uplink)
	if err != nil {
		return nil, fmt.Errorf("uplink %q in network namespace %q: %w", n.uplink, n.ns, err)
	}
	return lk, nil
}

// Held implements Dataplane.
func (n *Netlink) Held() ([]netip.Addr, error) {
	lk, err := n.link()
	if err != nil {
		return nil, err
	}
	addrs, err := n.h.AddrList(lk, unix.AF_INET)
	if err != nil {
		return nil, fmt.Errorf("listing addresses of %s in network namespace %q: %w", n.uplink, n.ns, err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if a.Label != n.label {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

// addr is ip as an announced address: a /32 with the label, living n.lifetime.
func (n *Netlink) addr(ip netip.Addr) *netlink.Addr {
	secs := max(int(n.lifetime/time.Second), 1)
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}, Label: n.label,
		ValidLft: secs, PreferedLft: secs}
}

// Take implements Dataplane: the address as Keep writes it, then gratuitous ARP.
func (n *Netlink) Take(ip netip.Addr) error {
	if err := n.Keep(ip); err != nil {
		return err
	}
	lk, err := n.link()
	if err != nil {
		return err
	}
	return n.gratuitousARP(lk, ip)
}

// Keep implements Dataplane: the address is replaced with a whole lifetime.
func (n *Netlink) Keep(ip netip.Addr) error {
	lk, err := n.link()
	if err != nil {
		return err
	}
	if err := n.h.AddrReplace(lk, n.addr(ip)); err != nil {
		return fmt.Errorf("adding %s/32 to %s in network namespace %q: %w", ip, n.uplink, n.ns, err)
	}
	return nil
}

// Announce implements Dataplane.
func (n *Netlink) Announce(ip netip.Addr) error {
	lk, err := n.link()
	if err != nil {
		return err
	}
	return n.gratuitousARP(lk, ip)
}

// Release implements Dataplane.
func (n *Netlink) Release(ip netip.Addr) error {
	lk, err := n.link()
	if err != nil {
		return err
	}
	if err := n.h.AddrDel(lk, n.addr(ip)); err != nil && err != unix.EADDRNOTAVAIL {
		return fmt.Errorf("removing %s/32 from %s in network namespace %q: %w", ip, n.uplink, n.ns, err)
	}
	return nil
}

// gratuitousARP broadcasts an ARP request and an ARP reply for ip from the uplink's MAC
// (RFC 5227's announcement; MetalLB sends both, as some hosts heed only one).
func (n *Netlink) gratuitousARP(lk netlink.Link, ip netip.Addr) error {
	mac := lk.Attrs().HardwareAddr
	if len(mac) != 6 {
		return fmt.Errorf("uplink %q in network namespace %q has no Ethernet address", n.uplink, n.ns)
	}
	var fd int
	if err := netns.Do(n.ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
		return err
	}); err != nil {
		return fmt.Errorf("gratuitous ARP for %s in network namespace %q: %w", ip, n.ns, err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: lk.Attrs().Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for _, op := range []uint16{1, 2} {
		if err := unix.Sendto(fd, ARPFrame(mac, ip, op), 0, to); err != nil {
			return fmt.Errorf("gratuitous ARP for %s on %s in network namespace %q: %w", ip, n.uplink, n.ns, err)
		}
	}
	return nil
}

// ARPFrame returns the broadcast Ethernet frame of a gratuitous ARP for ip from mac:
// sender and target address both ip, op 1 (request) or 2 (reply).
func ARPFrame(mac net.HardwareAddr, ip netip.Addr, op uint16) []byte {
	b := make([]byte, 42)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], mac)
	binary.BigEndian.PutUint16(b[12:], unix.ETH_P_ARP)
	binary.BigEndian.PutUint16(b[14:], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[16:], 0x0800) // IPv4
	b[18], b[19] = 6, 4
	binary.BigEndian.PutUint16(b[20:], op)
	ip4 := ip.As4()
	copy(b[22:28], mac)
	copy(b[28:32], ip4[:])
	if op == 2 {
		copy(b[32:38], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	}
	copy(b[38:42], ip4[:])
	return b
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
