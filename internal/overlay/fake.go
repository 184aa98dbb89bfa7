package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// Fake is an in-memory Dataplane for tests, safe for concurrent use (read its fields
// only when nothing runs, or through State). Like the kernel, it refuses a route, ARP or
// FDB entry on a device that does not exist, and the vxlan device's entries (and routes)
// go with it.
type Fake struct {
	mu sync.Mutex
	// Links are the links and their MTUs; Addrs the address each uplink holds.
	Links map[string]int
	Addrs map[string]netip.Prefix
	// MAC is the MAC the vxlan device gets when created.
	MAC net.HardwareAddr
	// Current is the state in the "kernel".
	Current State
	// Creates counts vxlan device creations; Writes counts Apply calls that changed
	// something.
	Creates, Writes int
}

var _ Dataplane = (*Fake)(nil)

// Uplink implements Dataplane.
func (f *Fake) Uplink(addr netip.Addr) (string, netip.Prefix, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, p := range f.Addrs {
		if p.Addr() == addr {
			return name, p, f.Links[name], nil
		}
	}
	return "", netip.Prefix{}, 0, fmt.Errorf("no link holds %s", addr)
}

// EnsureVXLAN implements Dataplane.
func (f *Fake) EnsureVXLAN(local netip.Addr, uplink string, mtu int, addr netip.Prefix) (net.HardwareAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.Links[uplink]; !ok {
		return nil, fmt.Errorf("uplink %q: link not found", uplink)
	}
	if _, ok := f.Links[VXLANDevice]; !ok {
		f.Creates++
	}
	f.Links[VXLANDevice] = mtu
	return f.MAC, nil
}

// DeleteVXLAN implements Dataplane.
func (f *Fake) DeleteVXLAN() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Links, VXLANDevice)
	f.Current.Routes = slices.DeleteFunc(f.Current.Routes, func(r Route) bool { return r.Dev == VXLANDevice })
	f.Current.Neighs, f.Current.FDB = nil, nil
	return nil
}

// State implements Dataplane.
func (f *Fake) State() (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := State{Routes: slices.Clone(f.Current.Routes), Neighs: slices.Clone(f.Current.Neighs), FDB: slices.Clone(f.Current.FDB)}
	s.sort()
	return s, nil
}

// Apply implements Dataplane.
func (f *Fake) Apply(c Changes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Empty() {
		return nil
	}
	f.Writes++
	var errs []error
	dev := func(d string) bool {
		if _, ok := f.Links[d]; !ok {
			errs = append(errs, fmt.Errorf("device %q: link not found", d))
			return false
		}
		return true
	}
	for _, r := range c.DelRoutes {
		f.Current.Routes = slices.DeleteFunc(f.Current.Routes, func(x Route) bool { return x.Dst == r.Dst })
	}
	for _, n := range c.DelNeighs {
		f.Current.Neighs = slices.DeleteFunc(f.Current.Neighs, func(x Neigh) bool { return x.IP == n.IP })
	}
	for _, e := range c.DelFDB {
		f.Current.FDB = slices.DeleteFunc(f.Current.FDB, func(x FDB) bool { return x == e })
	}
	for _, e := range c.AddFDB {
		if dev(e.Dev) {
			f.Current.FDB = append(slices.DeleteFunc(f.Current.FDB, func(x FDB) bool { return x.MAC == e.MAC }), e)
		}
	}
	for _, n := range c.AddNeighs {
		if dev(n.Dev) {
			f.Current.Neighs = append(slices.DeleteFunc(f.Current.Neighs, func(x Neigh) bool { return x.IP == n.IP }), n)
		}
	}
	for _, r := range c.AddRoutes {
		if dev(r.Dev) {
			f.Current.Routes = append(slices.DeleteFunc(f.Current.Routes, func(x Route) bool { return x.Dst == r.Dst }), r)
		}
	}
	return errors.Join(errs...)
}
