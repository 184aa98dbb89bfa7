package proxy

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
)

var (
	_ IPVSDevice     = (*FakeIPVSDevice)(nil)
	_ IPVSRuleWriter = (*FakeIPVSRules)(nil)
)

// FakeIPVSDevice is an in-memory kube-ipvs0 that fails like netlink: an address on a
// missing device with ENODEV, a duplicate address with EEXIST, deleting a missing one
// with EADDRNOTAVAIL. Safe for concurrent use.
type FakeIPVSDevice struct {
	mu     sync.Mutex
	exists bool
	addrs  map[netip.Addr]bool
	// Calls logs "add 10.96.0.1", "del 10.96.0.1", "create" and "delete".
	Calls []string
}

// NewFakeIPVSDevice returns a fake without a device.
func NewFakeIPVSDevice() *FakeIPVSDevice { return &FakeIPVSDevice{addrs: map[netip.Addr]bool{}} }

// Ensure creates the device when missing.
func (f *FakeIPVSDevice) Ensure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		f.exists = true
		f.Calls = append(f.Calls, "create")
	}
	return nil
}

// Addresses lists the addresses, sorted.
func (f *FakeIPVSDevice) Addresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.SortedFunc(maps.Keys(f.addrs), netip.Addr.Compare), nil
}

// AddAddress adds a /32.
func (f *FakeIPVSDevice) AddAddress(a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.exists:
		return fmt.Errorf("%s: %w", IPVSDeviceName, syscall.ENODEV)
	case f.addrs[a]:
		return fmt.Errorf("%s on %s: %w", a, IPVSDeviceName, syscall.EEXIST)
	}
	f.addrs[a] = true
	f.Calls = append(f.Calls, "add "+a.String())
	return nil
}

// DelAddress deletes an address.
func (f *FakeIPVSDevice) DelAddress(a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.exists:
		return fmt.Errorf("%s: %w", IPVSDeviceName, syscall.ENODEV)
	case !f.addrs[a]:
		return fmt.Errorf("%s on %s: %w", a, IPVSDeviceName, syscall.EADDRNOTAVAIL)
	}
	delete(f.addrs, a)
	f.Calls = append(f.Calls, "del "+a.String())
	return nil
}

// Delete removes the device and its addresses.
func (f *FakeIPVSDevice) Delete() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exists {
		f.Calls = append(f.Calls, "delete")
	}
	f.exists = false
	clear(f.addrs)
	return nil
}

// Dump lists the device's addresses as `ip -4 -br addr show kube-ipvs0` would, one a line.
func (f *FakeIPVSDevice) Dump() string {
	as, _ := f.Addresses()
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "%s %s/32\n", IPVSDeviceName, a)
	}
	return b.String()
}

// FakeIPVSRules keeps the ipsets' members and the last iptables text written, after
// checking them the way ipset and iptables-restore would reject them: a member of a
// set not created, an unknown command, a rule in a chain its table section did not
// declare, a table not committed. A refused restore changes nothing.
type FakeIPVSRules struct {
	mu sync.Mutex
	// IPSets is the last ipset text restored, IPTables the last iptables text.
	IPSets, IPTables string
	Jumps            []IPVSJump
	sets             map[string]map[string]bool
	// Writes counts the successful restores of either kind.
	Writes int
	// Cleaned is set by Cleanup, which empties everything.
	Cleaned bool
}

// RestoreIPSets validates and applies text as `ipset -exist restore` does.
func (f *FakeIPVSRules) RestoreIPSets(_ context.Context, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := map[string]map[string]bool{}
	for name, ms := range f.sets {
		next[name] = maps.Clone(ms)
	}
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		w := strings.Fields(l)
		if len(w) < 2 {
			return fmt.Errorf("ipset restore line %d %q: missing set name", i+1, l)
		}
		set := next[w[1]]
		switch {
		case w[0] == "create" && len(w) < 3:
			return fmt.Errorf("ipset restore line %d %q: missing set type", i+1, l)
		case w[0] == "create":
			if set == nil {
				next[w[1]] = map[string]bool{}
			}
		case w[0] != "flush" && w[0] != "add" && w[0] != "del":
			return fmt.Errorf("ipset restore line %d %q: unknown command %s", i+1, l, w[0])
		case set == nil:
			return fmt.Errorf("ipset restore line %d %q: the set with the given name does not exist", i+1, l)
		case w[0] == "flush":
			clear(set)
		case len(w) != 3:
			return fmt.Errorf("ipset restore line %d %q: want one member", i+1, l)
		case w[0] == "add":
			set[w[2]] = true
		default:
			delete(set, w[2])
		}
	}
	f.sets = next
	f.IPSets = text
	f.Writes++
	return nil
}

// Members lists every member as "add SET MEMBER" lines, sets in the order the mode
// writes them, members sorted.
func (f *FakeIPVSRules) Members() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, s := range ipvsIPSets {
		for _, m := range slices.Sorted(maps.Keys(f.sets[s.name])) {
			b.WriteString("add " + s.name + " " + m + "\n")
		}
	}
	return b.String()
}

// RestoreIPTables validates and keeps text and jumps.
func (f *FakeIPVSRules) RestoreIPTables(_ context.Context, text string, jumps []IPVSJump) error {
	table := ""
	declared := map[string]bool{}
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			if table != "" {
				return fmt.Errorf("iptables-restore line %d: table %s not committed", i+1, table)
			}
			table = l[1:]
			clear(declared)
		case l == "COMMIT":
			table = ""
		case table == "":
			return fmt.Errorf("iptables-restore line %d %q: no table", i+1, l)
		case strings.HasPrefix(l, ":"):
			declared[strings.Fields(l[1:])[0]] = true
		case strings.HasPrefix(l, "-A "):
			if c := strings.Fields(l)[1]; !declared[c] {
				return fmt.Errorf("iptables-restore line %d %q: chain %s not declared in table %s", i+1, l, c, table)
			}
		default:
			return fmt.Errorf("iptables-restore line %d %q: bad command", i+1, l)
		}
	}
	if table != "" {
		return fmt.Errorf("iptables-restore: table %s not committed", table)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.IPTables, f.Jumps = text, slices.Clone(jumps)
	f.Writes++
	return nil
}

// Cleanup forgets everything.
func (f *FakeIPVSRules) Cleanup(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.IPSets, f.IPTables, f.Jumps, f.sets, f.Cleaned = "", "", nil, nil, true
	return nil
}
