// Package tracer walks a packet through the nftables tables a node holds, each as held
// by a knftables.Fake (the proxy's, and the NetworkPolicy table), and reports where it
// ends up. It understands exactly the rule shapes those generators emit and fails on
// anything else, so that the generators and the tracer change together and a rule the
// tracer cannot explain never goes unnoticed.
//
// At each hook the base chains of every table run in priority order, as in the kernel:
// a drop or reject in any of them ends the packet, an accept (or falling off a chain
// whose policy is accept) hands it to the next base chain of the hook.
//
// The tracer follows the first packet of a new connection: conntrack state is "new",
// dynamic (affinity) sets are read as they are in the fake, and every branch of a
// `numgen random` choice is explored, so a trace lists every possible outcome.
package tracer

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"
)

// Packet is the first packet of a connection.
type Packet struct {
	Src, Dst netip.Addr
	// Proto is "tcp", "udp", "sctp" or "icmp".
	Proto string
	DPort uint16
	// FromHost marks a packet sent by the node itself (output path) rather than one
	// arriving on an interface (prerouting path).
	FromHost bool
}

// Outcome is one possible fate of a packet.
type Outcome struct {
	// Verdict is "accept", "drop" or "reject" ("reject tcp-reset" for a TCP reset).
	Verdict string
	// DNAT is the "ip:port" the destination was rewritten to, if any.
	DNAT string
	// Masquerade is true when the source is rewritten to the node's address.
	Masquerade bool
	// Counters are the named counters (`counter name "x"`) the packet passed, in the
	// order it passed them: which policy rule allowed it or which pod's deny counter
	// it hit. They are not part of String.
	Counters []string
}

// String renders an outcome as "verdict[ dnat ip:port][ masquerade]".
func (o Outcome) String() string {
	s := o.Verdict
	if o.DNAT != "" {
		s += " dnat " + o.DNAT
	}
	if o.Masquerade {
		s += " masquerade"
	}
	return s
}

// key identifies an outcome among a trace's: its String and its counters.
func (o Outcome) key() string {
	return o.String() + "\x00" + strings.Join(o.Counters, ",")
}

// Tracer traces packets through the tables of one node.
type Tracer struct {
	tables []table
	local  []netip.Addr
}

// table is one fake's table with its family and name (the fake's FakeTable leaves
// them empty when the table was added under the fake's default names).
type table struct {
	*knftables.FakeTable
	family knftables.Family
	name   string
}

// New returns a tracer over the table of fake; localAddrs are the node's own addresses
// (what `fib ... type local` matches, besides 127.0.0.0/8).
func New(fake *knftables.Fake, localAddrs ...netip.Addr) (*Tracer, error) {
	return NewMulti([]*knftables.Fake{fake}, localAddrs...)
}

// NewMulti returns a tracer over the tables of several fakes, all of one node (a
// packet meets every table's base chains of each hook it crosses); localAddrs are as
// for New. Base chains of equal priority run in the order of fakes.
func NewMulti(fakes []*knftables.Fake, localAddrs ...netip.Addr) (*Tracer, error) {
	t := &Tracer{local: localAddrs}
	seen := map[string]bool{}
	for i, f := range fakes {
		if f == nil || f.Table == nil {
			return nil, fmt.Errorf("tracer: fake %d has no table", i)
		}
		tb := table{FakeTable: f.Table}
		for fam, byName := range f.Tables {
			for name, ft := range byName {
				if ft == f.Table {
					tb.family, tb.name = fam, name
				}
			}
		}
		if tb.name == "" {
			return nil, fmt.Errorf("tracer: fake %d: its table is not among its tables", i)
		}
		id := string(tb.family) + " " + tb.name
		if seen[id] {
			return nil, fmt.Errorf("tracer: table %s given twice", id)
		}
		seen[id] = true
		t.tables = append(t.tables, tb)
	}
	if len(t.tables) == 0 {
		return nil, fmt.Errorf("tracer: no table")
	}
	return t, nil
}

// state is the packet as rewritten so far along one branch.
type state struct {
	src, dst netip.Addr
	proto    string
	dport    uint16
	mark     uint64
	dnat     bool
	masq     bool
	// counters are the named counters passed so far.
	counters []string
	// tbl is the table whose chains are running: chains, sets and maps are its own.
	tbl *knftables.FakeTable
}

// brancher enumerates numgen choices by re-running the trace: choices made so far and
// the number of options at each choice point.
type brancher struct {
	path  []int
	sizes []int
	pos   int
}

func (b *brancher) choose(n int) int {
	if b.pos == len(b.path) {
		b.path = append(b.path, 0)
		b.sizes = append(b.sizes, n)
	}
	c := b.path[b.pos]
	b.pos++
	return c
}

// next advances to the next unexplored branch; false when all were explored.
func (b *brancher) next() bool {
	b.path, b.sizes = b.path[:b.pos], b.sizes[:b.pos]
	for i := len(b.path) - 1; i >= 0; i-- {
		if b.path[i]+1 < b.sizes[i] {
			b.path[i]++
			b.path, b.sizes = b.path[:i+1], b.sizes[:i+1]
			b.pos = 0
			return true
		}
	}
	return false
}

// Trace returns every possible outcome of p, sorted and without duplicates.
func (t *Tracer) Trace(p Packet) ([]Outcome, error) {
	b := &brancher{}
	seen := map[string]Outcome{}
	for {
		b.pos = 0
		o, err := t.traceOnce(p, b)
		if err != nil {
			return nil, err
		}
		seen[o.key()] = o
		if !b.next() {
			break
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Outcome, len(keys))
	for i, k := range keys {
		out[i] = seen[k]
	}
	return out, nil
}

func (t *Tracer) traceOnce(p Packet, b *brancher) (Outcome, error) {
	st := &state{src: p.Src, dst: p.Dst, proto: p.Proto, dport: p.DPort}
	hooks := []knftables.BaseChainHook{knftables.PreroutingHook}
	if p.FromHost {
		hooks = []knftables.BaseChainHook{knftables.OutputHook}
	}
	for i := 0; i < len(hooks); i++ {
		v, err := t.runHook(hooks[i], st, b)
		if err != nil || v != "accept" {
			return t.outcome(v, st), err
		}
		if hooks[i] == knftables.PreroutingHook {
			if t.isLocal(st.dst) {
				hooks = append(hooks, knftables.InputHook)
			} else {
				hooks = append(hooks, knftables.ForwardHook, knftables.PostroutingHook)
			}
		}
		if hooks[i] == knftables.OutputHook {
			hooks = append(hooks, knftables.PostroutingHook)
		}
	}
	return t.outcome("accept", st), nil
}

func (t *Tracer) outcome(v string, st *state) Outcome {
	o := Outcome{Verdict: v, Masquerade: st.masq, Counters: slices.Clone(st.counters)}
	if st.dnat {
		o.DNAT = netip.AddrPortFrom(st.dst, st.dport).String()
	}
	return o
}

func (t *Tracer) isLocal(a netip.Addr) bool {
	return netip.MustParsePrefix("127.0.0.0/8").Contains(a) || slices.Contains(t.local, a)
}

// runHook runs the base chains of one hook, of every table, in priority order (ties
// in table order, then by name); "accept" lets the packet on.
func (t *Tracer) runHook(hook knftables.BaseChainHook, st *state, b *brancher) (string, error) {
	type base struct {
		table int
		name  string
		prio  int
	}
	var chains []base
	for ti, tbl := range t.tables {
		for name, c := range tbl.Chains {
			if c.Hook == nil || *c.Hook != hook {
				continue
			}
			if c.Priority == nil {
				return "", fmt.Errorf("table %s: base chain %s has no priority", tbl.name, name)
			}
			prio, err := knftables.ParsePriority(tbl.family, string(*c.Priority))
			if err != nil {
				return "", fmt.Errorf("table %s: chain %s: %w", tbl.name, name, err)
			}
			chains = append(chains, base{ti, name, prio})
		}
	}
	sort.Slice(chains, func(i, j int) bool {
		if chains[i].prio != chains[j].prio {
			return chains[i].prio < chains[j].prio
		}
		if chains[i].table != chains[j].table {
			return chains[i].table < chains[j].table
		}
		return chains[i].name < chains[j].name
	})
	for _, c := range chains {
		st.tbl = t.tables[c.table].FakeTable
		v, err := t.runChain(c.name, st, b, 0)
		if err != nil {
			if len(t.tables) > 1 {
				err = fmt.Errorf("table %s: %w", t.tables[c.table].name, err)
			}
			return "", err
		}
		if v == "drop" || strings.HasPrefix(v, "reject") {
			return v, nil
		}
	}
	return "accept", nil
}

// runChain evaluates a chain: "" means the packet fell off the end (or hit return),
// anything else is a verdict that ends the base chain.
func (t *Tracer) runChain(name string, st *state, b *brancher, depth int) (string, error) {
	c := st.tbl.Chains[name]
	if c == nil {
		return "", fmt.Errorf("no chain %q", name)
	}
	if depth > 16 {
		return "", fmt.Errorf("chain %q: jumps nested too deep", name)
	}
	for _, r := range c.Rules {
		v, err := t.runRule(r.Rule, st, b, depth)
		if err != nil {
			return "", fmt.Errorf("chain %s: rule %q: %w", name, r.Rule, err)
		}
		switch v {
		case "":
		case "return":
			return "", nil
		default:
			return v, nil
		}
	}
	return "", nil
}

// verdict applies a verdict string ("goto C", "jump C", "drop", ...) and returns the
// rule's result: "" to continue with the next rule.
func (t *Tracer) verdict(v string, st *state, b *brancher, depth int) (string, error) {
	f := strings.Fields(v)
	switch {
	case len(f) == 2 && f[0] == "jump":
		res, err := t.runChain(f[1], st, b, depth+1)
		return res, err
	case len(f) == 2 && f[0] == "goto":
		res, err := t.runChain(f[1], st, b, depth+1)
		if err == nil && res == "" {
			res = "return"
		}
		return res, err
	case v == "drop" || v == "accept" || v == "return":
		return v, nil
	}
	return "", fmt.Errorf("unsupported verdict %q", v)
}
