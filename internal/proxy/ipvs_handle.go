package proxy

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/ipvs"
)

// IPVSHandle is the part of github.com/moby/ipvs's *Handle the ipvs proxier uses: one
// handle opened inside the node's network namespace programs its virtual servers.
type IPVSHandle interface {
	GetServices() ([]*ipvs.Service, error)
	NewService(*ipvs.Service) error
	UpdateService(*ipvs.Service) error
	DelService(*ipvs.Service) error
	GetDestinations(*ipvs.Service) ([]*ipvs.Destination, error)
	NewDestination(*ipvs.Service, *ipvs.Destination) error
	UpdateDestination(*ipvs.Service, *ipvs.Destination) error
	DelDestination(*ipvs.Service, *ipvs.Destination) error
	Flush() error
}

var (
	_ IPVSHandle = (*ipvs.Handle)(nil)
	_ IPVSHandle = (*FakeIPVS)(nil)
)

// IPVSSchedulers are the schedulers the Linux kernel ships (ip_vs_<name> modules).
var IPVSSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}

// Service flags of the kernel's ip_vs.h used here.
const (
	ipvsFlagPersistent = 0x1
	ipvsFlagHashed     = 0x2
)

// vsKey identifies a virtual server as the kernel does (no firewall-mark services here).
type vsKey struct {
	proto uint16
	addr  netip.Addr
	port  uint16
}

func vsKeyOf(s *ipvs.Service) vsKey {
	a, _ := netip.AddrFromSlice(s.Address)
	return vsKey{s.Protocol, a.Unmap(), s.Port}
}

func (k vsKey) String() string {
	return ipvsProtoName(k.proto) + " " + netip.AddrPortFrom(k.addr, k.port).String()
}

func compareVSKeys(a, b vsKey) int {
	if c := cmp.Compare(a.proto, b.proto); c != 0 {
		return c
	}
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	return cmp.Compare(a.port, b.port)
}

// rsKey identifies a real server within its virtual server.
type rsKey = netip.AddrPort

func rsKeyOf(d *ipvs.Destination) rsKey {
	a, _ := netip.AddrFromSlice(d.Address)
	return netip.AddrPortFrom(a.Unmap(), d.Port)
}

func ipvsProtoName(p uint16) string {
	switch p {
	case syscall.IPPROTO_TCP:
		return "TCP"
	case syscall.IPPROTO_UDP:
		return "UDP"
	case syscall.IPPROTO_SCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", p)
}

// FakeIPVS is an in-memory IPVSHandle that validates like the kernel's ip_vs: a
// duplicate virtual or real server fails with EEXIST, an operation on a missing
// virtual server with ESRCH and on a missing real server with ENOENT, an unknown
// scheduler with ENOENT, a negative weight with ERANGE. Every mutating call is
// appended to Calls. Safe for concurrent use.
type FakeIPVS struct {
	mu  sync.Mutex
	vss map[vsKey]*fakeVS
	// Calls logs each mutating call as "verb TCP 10.96.0.1:80[ -> 10.244.1.2:8080 w1]".
	Calls []string
	// Fail, when set, is asked before each call (named as in Calls); a non-nil
	// result fails the call without changing anything.
	Fail func(call string) error
}

type fakeVS struct {
	svc   ipvs.Service
	dests map[rsKey]*ipvs.Destination
}

// NewFakeIPVS returns an empty fake.
func NewFakeIPVS() *FakeIPVS { return &FakeIPVS{vss: map[vsKey]*fakeVS{}} }

func (f *FakeIPVS) call(verb string, s *ipvs.Service, d *ipvs.Destination) error {
	c := verb + " " + vsKeyOf(s).String()
	if d != nil {
		c += fmt.Sprintf(" -> %s w%d", rsKeyOf(d), d.Weight)
	}
	if f.Fail != nil {
		if err := f.Fail(c); err != nil {
			return err
		}
	}
	f.Calls = append(f.Calls, c)
	return nil
}

func ipvsValidService(s *ipvs.Service) error {
	a, ok := netip.AddrFromSlice(s.Address)
	switch {
	case !ok || s.FWMark != 0:
		return fmt.Errorf("virtual server %v: only address services are supported: %w", s.Address, syscall.EINVAL)
	case s.AddressFamily != syscall.AF_INET || !a.Unmap().Is4():
		return fmt.Errorf("virtual server %v: address family %d: %w", s.Address, s.AddressFamily, syscall.EAFNOSUPPORT)
	case s.Protocol != syscall.IPPROTO_TCP && s.Protocol != syscall.IPPROTO_UDP && s.Protocol != syscall.IPPROTO_SCTP:
		return fmt.Errorf("virtual server %v: protocol %d: %w", s.Address, s.Protocol, syscall.EPROTONOSUPPORT)
	case s.Port == 0:
		return fmt.Errorf("virtual server %v: port 0: %w", s.Address, syscall.EINVAL)
	case !slices.Contains(IPVSSchedulers, s.SchedName):
		return fmt.Errorf("virtual server %s: scheduler %q not found: %w", vsKeyOf(s), s.SchedName, syscall.ENOENT)
	}
	return nil
}

// NewService adds a virtual server.
func (f *FakeIPVS) NewService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ipvsValidService(s); err != nil {
		return err
	}
	k := vsKeyOf(s)
	if f.vss[k] != nil {
		return fmt.Errorf("virtual server %s: %w", k, syscall.EEXIST)
	}
	if err := f.call("add", s, nil); err != nil {
		return err
	}
	f.vss[k] = &fakeVS{svc: ipvsCopyService(s), dests: map[rsKey]*ipvs.Destination{}}
	return nil
}

// UpdateService changes a virtual server's scheduler, flags and timeout.
func (f *FakeIPVS) UpdateService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ipvsValidService(s); err != nil {
		return err
	}
	vs := f.vss[vsKeyOf(s)]
	if vs == nil {
		return fmt.Errorf("virtual server %s: %w", vsKeyOf(s), syscall.ESRCH)
	}
	if err := f.call("edit", s, nil); err != nil {
		return err
	}
	vs.svc = ipvsCopyService(s)
	return nil
}

// DelService deletes a virtual server with its real servers.
func (f *FakeIPVS) DelService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := vsKeyOf(s)
	if f.vss[k] == nil {
		return fmt.Errorf("virtual server %s: %w", k, syscall.ESRCH)
	}
	if err := f.call("delete", s, nil); err != nil {
		return err
	}
	delete(f.vss, k)
	return nil
}

// Flush deletes every virtual server.
func (f *FakeIPVS) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fail != nil {
		if err := f.Fail("flush"); err != nil {
			return err
		}
	}
	f.Calls = append(f.Calls, "flush")
	clear(f.vss)
	return nil
}

// GetServices lists the virtual servers, sorted by protocol, address and port.
func (f *FakeIPVS) GetServices() ([]*ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*ipvs.Service, 0, len(f.vss))
	for _, k := range slices.SortedFunc(maps.Keys(f.vss), compareVSKeys) {
		s := ipvsCopyService(&f.vss[k].svc)
		out = append(out, &s)
	}
	return out, nil
}

// GetDestinations lists a virtual server's real servers, sorted by address and port.
func (f *FakeIPVS) GetDestinations(s *ipvs.Service) ([]*ipvs.Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := f.vss[vsKeyOf(s)]
	if vs == nil {
		return nil, fmt.Errorf("virtual server %s: %w", vsKeyOf(s), syscall.ESRCH)
	}
	out := make([]*ipvs.Destination, 0, len(vs.dests))
	for _, k := range slices.SortedFunc(maps.Keys(vs.dests), netip.AddrPort.Compare) {
		d := *vs.dests[k]
		d.Address = slices.Clone(d.Address)
		out = append(out, &d)
	}
	return out, nil
}

func (f *FakeIPVS) destCall(verb string, s *ipvs.Service, d *ipvs.Destination, wantExists bool) (*fakeVS, error) {
	vs := f.vss[vsKeyOf(s)]
	if vs == nil {
		return nil, fmt.Errorf("real server %s of virtual server %s: %w", rsKeyOf(d), vsKeyOf(s), syscall.ESRCH)
	}
	a, ok := netip.AddrFromSlice(d.Address)
	if !ok || !a.Unmap().Is4() || d.AddressFamily != syscall.AF_INET {
		return nil, fmt.Errorf("real server %v: %w", d.Address, syscall.EAFNOSUPPORT)
	}
	if d.Weight < 0 {
		return nil, fmt.Errorf("real server %s: weight %d: %w", rsKeyOf(d), d.Weight, syscall.ERANGE)
	}
	_, exists := vs.dests[rsKeyOf(d)]
	switch {
	case exists && !wantExists:
		return nil, fmt.Errorf("real server %s of virtual server %s: %w", rsKeyOf(d), vsKeyOf(s), syscall.EEXIST)
	case !exists && wantExists:
		return nil, fmt.Errorf("real server %s of virtual server %s: %w", rsKeyOf(d), vsKeyOf(s), syscall.ENOENT)
	}
	return vs, f.call(verb, s, d)
}

// NewDestination adds a real server to a virtual server.
func (f *FakeIPVS) NewDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs, err := f.destCall("add", s, d, false)
	if err != nil {
		return err
	}
	c := *d
	c.Address = slices.Clone(d.Address)
	c.ActiveConnections, c.InactiveConnections = 0, 0
	vs.dests[rsKeyOf(d)] = &c
	return nil
}

// UpdateDestination changes a real server's weight and forwarding method.
func (f *FakeIPVS) UpdateDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs, err := f.destCall("edit", s, d, true)
	if err != nil {
		return err
	}
	cur := vs.dests[rsKeyOf(d)]
	cur.Weight, cur.ConnectionFlags = d.Weight, d.ConnectionFlags
	return nil
}

// DelDestination deletes a real server.
func (f *FakeIPVS) DelDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs, err := f.destCall("delete", s, d, true)
	if err != nil {
		return err
	}
	delete(vs.dests, rsKeyOf(d))
	return nil
}

// SetConnections sets the connection counters the kernel would report for a real
// server ("10.96.0.1:80" of proto "TCP", real server "10.244.1.2:8080"); it fails when
// either is missing.
func (f *FakeIPVS) SetConnections(proto, vip, rip string, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	va, err := netip.ParseAddrPort(vip)
	if err != nil {
		return err
	}
	ra, err := netip.ParseAddrPort(rip)
	if err != nil {
		return err
	}
	for k, vs := range f.vss {
		if k.addr == va.Addr() && k.port == va.Port() && ipvsProtoName(k.proto) == proto {
			if d := vs.dests[ra]; d != nil {
				d.ActiveConnections, d.InactiveConnections = active, inactive
				return nil
			}
		}
	}
	return fmt.Errorf("no real server %s of %s %s", rip, proto, vip)
}

// ResetCalls empties the call log.
func (f *FakeIPVS) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = nil
}

// Dump returns the table as `ipvsadm -Ln` prints it, virtual servers sorted by
// protocol, address and port and real servers by address and port (the kernel lists
// them in hash order; sorting makes the dump comparable).
func (f *FakeIPVS) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	b.WriteString("IP Virtual Server version 1.2.1 (size=4096)\n")
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, k := range slices.SortedFunc(maps.Keys(f.vss), compareVSKeys) {
		vs := f.vss[k]
		fmt.Fprintf(&b, "%-4s %s %s", ipvsProtoName(k.proto), netip.AddrPortFrom(k.addr, k.port), vs.svc.SchedName)
		if vs.svc.Flags&ipvsFlagPersistent != 0 {
			fmt.Fprintf(&b, " persistent %d", vs.svc.Timeout)
			if vs.svc.Netmask != 0xffffffff {
				fmt.Fprintf(&b, " mask %s", net.IP(net.CIDRMask(ipvsMaskBits(vs.svc.Netmask), 32)))
			}
		}
		b.WriteString("\n")
		for _, rk := range slices.SortedFunc(maps.Keys(vs.dests), netip.AddrPort.Compare) {
			d := vs.dests[rk]
			fmt.Fprintf(&b, "  -> %-28s %-7s %-6d %-10d %d\n", rk, ipvsForwardName(d.ConnectionFlags), d.Weight, d.ActiveConnections, d.InactiveConnections)
		}
	}
	return b.String()
}

func ipvsMaskBits(m uint32) int {
	n := 0
	for m&0x80000000 != 0 {
		n++
		m <<= 1
	}
	return n
}

func ipvsForwardName(flags uint32) string {
	switch flags & ipvs.ConnFwdMask {
	case ipvs.ConnFwdMasq:
		return "Masq"
	case ipvs.ConnFwdLocalNode:
		return "Local"
	case ipvs.ConnFwdTunnel:
		return "Tunnel"
	case ipvs.ConnFwdDirectRoute:
		return "Route"
	}
	return "Bypass"
}

func ipvsCopyService(s *ipvs.Service) ipvs.Service {
	c := *s
	c.Address = slices.Clone(s.Address)
	c.Stats = ipvs.SvcStats{}
	return c
}
