package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/netns"
)

// Dataplane is the kernel of one node's network namespace, narrowed to what the overlay
// reads and writes. Netlink is the real one, Fake the one tests use.
type Dataplane interface {
	// Uplink returns the link holding addr, with addr's prefix length on it and its MTU.
	Uplink(addr netip.Addr) (name string, prefix netip.Prefix, mtu int, err error)
	// EnsureVXLAN creates the vxlan device (VNI, port, local address local, over uplink,
	// no learning) with mtu and the address addr, or fixes an existing one, sets it up,
	// and returns its MAC. A device of the same name with other parameters is recreated.
	EnsureVXLAN(local netip.Addr, uplink string, mtu int, addr netip.Prefix) (net.HardwareAddr, error)
	// DeleteVXLAN removes the vxlan device (and with it its routes and entries); a
	// missing device is not an error.
	DeleteVXLAN() error
	// State returns the routes marked RouteProtocol and the vxlan device's permanent ARP
	// and FDB entries.
	State() (State, error)
	// Apply writes c: deletions first, then additions (replacing).
	Apply(c Changes) error
}

// Netlink is the Dataplane of a named network namespace, through a netlink socket opened
// there: it never changes any other namespace.
type Netlink struct {
	ns string
	h  *netlink.Handle
}

var _ Dataplane = (*Netlink)(nil)

// OpenNetlink opens the Dataplane of the named network namespace (/run/netns/NAME).
func OpenNetlink(ns string) (*Netlink, error) {
	var h *netlink.Handle
	err := netns.Do(ns, func() error {
		var err error
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening netlink in network namespace %q: %w", ns, err)
	}
	return &Netlink{ns: ns, h: h}, nil
}

// Close releases the netlink socket.
func (n *Netlink) Close() { n.h.Close() }

// Uplink implements Dataplane.
func (n *Netlink) Uplink(addr netip.Addr) (string, netip.Prefix, int, error) {
	addrs, err := n.h.AddrList(nil, unix.AF_INET)
	if err != nil {
		return "", netip.Prefix{}, 0, fmt.Errorf("listing addresses in network namespace %q: %w", n.ns, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if !ok || ip != addr {
			continue
		}
		lk, err := n.h.LinkByIndex(a.LinkIndex)
		if err != nil {
			return "", netip.Prefix{}, 0, fmt.Errorf("link of %s in network namespace %q: %w", addr, n.ns, err)
		}
		bits, _ := a.Mask.Size()
		return lk.Attrs().Name, netip.PrefixFrom(ip, bits), lk.Attrs().MTU, nil
	}
	return "", netip.Prefix{}, 0, fmt.Errorf("no link in network namespace %q holds %s", n.ns, addr)
}

// EnsureVXLAN implements Dataplane.
func (n *Netlink) EnsureVXLAN(local netip.Addr, uplink string, mtu int, addr netip.Prefix) (net.HardwareAddr, error) {
	up, err := n.h.LinkByName(uplink)
	if err != nil {
		return nil, fmt.Errorf("uplink %q in network namespace %q: %w", uplink, n.ns, err)
	}
	want := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: VXLANDevice, MTU: mtu}, VxlanId: VNI,
		VtepDevIndex: up.Attrs().Index, SrcAddr: local.AsSlice(), Port: VXLANPort, Learning: false}
	lk, err := n.h.LinkByName(VXLANDevice)
	if err == nil {
		v, ok := lk.(*netlink.Vxlan)
		if !ok || v.VxlanId != VNI || v.Port != VXLANPort || v.VtepDevIndex != up.Attrs().Index || !v.SrcAddr.Equal(local.AsSlice()) || v.Learning {
			// Parameters other than the MTU cannot be changed in place.
			if err := n.h.LinkDel(lk); err != nil {
				return nil, fmt.Errorf("replacing %s in network namespace %q: %w", VXLANDevice, n.ns, err)
			}
			lk = nil
		}
	} else if !errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, fmt.Errorf("%s in network namespace %q: %w", VXLANDevice, n.ns, err)
	} else {
		lk = nil
	}
	if lk == nil {
		if err := n.h.LinkAdd(want); err != nil {
			return nil, fmt.Errorf("creating %s in network namespace %q: %w", VXLANDevice, n.ns, err)
		}
		if lk, err = n.h.LinkByName(VXLANDevice); err != nil {
			return nil, fmt.Errorf("%s in network namespace %q: %w", VXLANDevice, n.ns, err)
		}
	}
	if lk.Attrs().MTU != mtu {
		if err := n.h.LinkSetMTU(lk, mtu); err != nil {
			return nil, fmt.Errorf("setting MTU %d on %s in network namespace %q: %w", mtu, VXLANDevice, n.ns, err)
		}
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}}
	if err := n.h.AddrReplace(lk, a); err != nil {
		return nil, fmt.Errorf("adding %s to %s in network namespace %q: %w", addr, VXLANDevice, n.ns, err)
	}
	if err := n.h.LinkSetUp(lk); err != nil {
		return nil, fmt.Errorf("setting %s up in network namespace %q: %w", VXLANDevice, n.ns, err)
	}
	return lk.Attrs().HardwareAddr, nil
}

// DeleteVXLAN implements Dataplane.
func (n *Netlink) DeleteVXLAN() error {
	lk, err := n.h.LinkByName(VXLANDevice)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil
	}
	if err == nil {
		err = n.h.LinkDel(lk)
	}
	if err != nil {
		return fmt.Errorf("deleting %s in network namespace %q: %w", VXLANDevice, n.ns, err)
	}
	return nil
}

// State implements Dataplane.
func (n *Netlink) State() (State, error) {
	var s State
	routes, err := n.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return s, fmt.Errorf("listing routes in network namespace %q: %w", n.ns, err)
	}
	names := map[int]string{}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		dev, ok := names[r.LinkIndex]
		if !ok {
			if lk, err := n.h.LinkByIndex(r.LinkIndex); err == nil {
				dev = lk.Attrs().Name
			}
			names[r.LinkIndex] = dev
		}
		dst, _ := netip.AddrFromSlice(r.Dst.IP.To4())
		bits, _ := r.Dst.Mask.Size()
		gw, _ := netip.AddrFromSlice(r.Gw.To4())
		s.Routes = append(s.Routes, Route{Dst: netip.PrefixFrom(dst, bits), Gw: gw, Dev: dev, OnLink: r.Flags&unix.RTNH_F_ONLINK != 0})
	}
	lk, err := n.h.LinkByName(VXLANDevice)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		s.sort()
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("%s in network namespace %q: %w", VXLANDevice, n.ns, err)
	}
	neighs, err := n.h.NeighList(lk.Attrs().Index, unix.AF_INET)
	if err != nil {
		return s, fmt.Errorf("listing ARP entries of %s in network namespace %q: %w", VXLANDevice, n.ns, err)
	}
	for _, e := range neighs {
		ip, ok := netip.AddrFromSlice(e.IP.To4())
		if ok && e.State&netlink.NUD_PERMANENT != 0 {
			s.Neighs = append(s.Neighs, Neigh{IP: ip, MAC: e.HardwareAddr.String(), Dev: VXLANDevice})
		}
	}
	fdb, err := n.h.NeighList(lk.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		return s, fmt.Errorf("listing FDB entries of %s in network namespace %q: %w", VXLANDevice, n.ns, err)
	}
	for _, e := range fdb {
		ip, ok := netip.AddrFromSlice(e.IP.To4())
		if ok && len(e.HardwareAddr) == 6 {
			s.FDB = append(s.FDB, FDB{MAC: e.HardwareAddr.String(), Dst: ip, Dev: VXLANDevice})
		}
	}
	s.sort()
	return s, nil
}

// Apply implements Dataplane. It goes on past a failed entry and returns every failure.
func (n *Netlink) Apply(c Changes) error {
	var errs []error
	wrap := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s in network namespace %q: %w", what, n.ns, err))
		}
	}
	for _, r := range c.DelRoutes {
		nr, err := n.route(r)
		if err == nil {
			if err = n.h.RouteDel(nr); errors.Is(err, unix.ESRCH) {
				err = nil
			}
		}
		wrap("deleting route to "+r.Dst.String(), err)
	}
	for _, e := range c.DelNeighs {
		nn, err := n.neigh(e)
		if err == nil {
			if err = n.h.NeighDel(nn); errors.Is(err, unix.ENOENT) {
				err = nil
			}
		}
		wrap("deleting ARP entry "+e.IP.String(), err)
	}
	for _, f := range c.DelFDB {
		nf, err := n.fdb(f)
		if err == nil {
			if err = n.h.NeighDel(nf); errors.Is(err, unix.ENOENT) {
				err = nil
			}
		}
		wrap("deleting FDB entry "+f.MAC, err)
	}
	for _, f := range c.AddFDB {
		nf, err := n.fdb(f)
		if err == nil {
			err = n.h.NeighSet(nf)
		}
		wrap(fmt.Sprintf("adding FDB entry %s dst %s", f.MAC, f.Dst), err)
	}
	for _, e := range c.AddNeighs {
		nn, err := n.neigh(e)
		if err == nil {
			err = n.h.NeighSet(nn)
		}
		wrap(fmt.Sprintf("adding ARP entry %s lladdr %s", e.IP, e.MAC), err)
	}
	for _, r := range c.AddRoutes {
		nr, err := n.route(r)
		if err == nil {
			err = n.h.RouteReplace(nr)
		}
		wrap(fmt.Sprintf("adding route %s via %s dev %s", r.Dst, r.Gw, r.Dev), err)
	}
	return errors.Join(errs...)
}

func (n *Netlink) index(dev string) (int, error) {
	lk, err := n.h.LinkByName(dev)
	if err != nil {
		return 0, err
	}
	return lk.Attrs().Index, nil
}

func (n *Netlink) route(r Route) (*netlink.Route, error) {
	idx, err := n.index(r.Dev)
	if err != nil {
		return nil, err
	}
	d := r.Dst.Masked()
	nr := &netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: d.Addr().AsSlice(), Mask: net.CIDRMask(d.Bits(), 32)},
		Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
	if r.Gw.IsValid() {
		nr.Gw = r.Gw.AsSlice()
	}
	if r.OnLink {
		nr.Flags = unix.RTNH_F_ONLINK
	}
	return nr, nil
}

func (n *Netlink) neigh(e Neigh) (*netlink.Neigh, error) {
	idx, err := n.index(e.Dev)
	if err != nil {
		return nil, err
	}
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return nil, err
	}
	return &netlink.Neigh{LinkIndex: idx, Family: unix.AF_INET, State: netlink.NUD_PERMANENT, IP: e.IP.AsSlice(), HardwareAddr: mac}, nil
}

func (n *Netlink) fdb(f FDB) (*netlink.Neigh, error) {
	idx, err := n.index(f.Dev)
	if err != nil {
		return nil, err
	}
	mac, err := net.ParseMAC(f.MAC)
	if err != nil {
		return nil, err
	}
	return &netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT, Flags: netlink.NTF_SELF,
		IP: f.Dst.AsSlice(), HardwareAddr: mac}, nil
}

// LinkWatcher is what a Dataplane may add: word of links coming up, so that routes the
// kernel flushed when the uplink went down are written again at once rather than at the
// next resync.
type LinkWatcher interface {
	// LinkUps sends the name of every link seen up and running until done is closed.
	LinkUps(done <-chan struct{}) (<-chan string, error)
}

var _ LinkWatcher = (*Netlink)(nil)

// LinkUps implements LinkWatcher with a netlink subscription opened in the namespace.
func (n *Netlink) LinkUps(done <-chan struct{}) (<-chan string, error) {
	updates := make(chan netlink.LinkUpdate, 16)
	err := netns.Do(n.ns, func() error { return netlink.LinkSubscribe(updates, done) })
	if err != nil {
		return nil, fmt.Errorf("watching links in network namespace %q: %w", n.ns, err)
	}
	ups := make(chan string, 1)
	go func() {
		defer close(ups)
		for u := range updates {
			a := u.Attrs()
			if a == nil || a.Flags&net.FlagUp == 0 || u.IfInfomsg.Flags&unix.IFF_RUNNING == 0 {
				continue
			}
			select {
			case ups <- a.Name:
			case <-done:
				return
			}
		}
	}()
	return ups, nil
}
