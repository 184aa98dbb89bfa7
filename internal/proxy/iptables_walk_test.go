package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tranche/tranche/internal/proxy/tracer"
)

// iptWalker follows the first packet of a connection through the tables a
// FakeIPTables holds, from the built-in chains down (so the jumps into the proxy's
// chains are walked too): nat PREROUTING (OUTPUT for the node's own packets), then the
// filter chain of the hook the packet takes after DNAT, then nat POSTROUTING. It knows
// exactly the matches and targets the iptables mode writes and fails on anything else,
// so the generator and the walker change together. Every branch of a `statistic`
// choice is explored, and a `recent --rcheck` never matches (the client is new).
type iptWalker struct {
	f     *FakeIPTables
	local []netip.Addr
}

// iptState of one packet along one branch.
type walkState struct {
	src, dst netip.Addr
	proto    string
	dport    uint16
	mark     uint64
	dnat     string
	masq     bool
}

// walkBranches enumerates the statistic choices: pre are the choices made so far,
// later alternatives still to explore are pushed to todo.
type walkBranches struct {
	pre  []bool
	n    int
	todo *[][]bool
}

func (b *walkBranches) choose() bool {
	if b.n < len(b.pre) {
		b.n++
		return b.pre[b.n-1]
	}
	*b.todo = append(*b.todo, append(slices.Clone(b.pre[:b.n]), false))
	b.pre = append(b.pre[:b.n], true)
	b.n++
	return true
}

// trace returns every possible outcome as the nft tracer renders them, joined by " | ".
func (w *iptWalker) trace(p tracer.Packet) (string, error) {
	todo := [][]bool{{}}
	var outs []string
	for len(todo) > 0 {
		pre := todo[0]
		todo = todo[1:]
		b := &walkBranches{pre: pre, todo: &todo}
		o, err := w.once(p, b)
		if err != nil {
			return "", err
		}
		if !slices.Contains(outs, o) {
			outs = append(outs, o)
		}
	}
	slices.Sort(outs)
	return strings.Join(outs, " | "), nil
}

func (w *iptWalker) once(p tracer.Packet, b *walkBranches) (string, error) {
	st := &walkState{src: p.Src, dst: p.Dst, proto: p.Proto, dport: p.DPort}
	natHook, filterHook := "PREROUTING", "FORWARD"
	if p.FromHost {
		natHook = "OUTPUT"
	}
	v, err := w.chain("nat", natHook, st, b, 0)
	if err != nil {
		return "", err
	}
	if v == "DROP" {
		return "drop", nil
	}
	switch {
	case p.FromHost:
		filterHook = "OUTPUT"
	case w.isLocal(st.dst):
		filterHook = "INPUT"
	}
	v, err = w.chain("filter", filterHook, st, b, 0)
	if err != nil {
		return "", err
	}
	switch v {
	case "DROP":
		return "drop", nil
	case "REJECT":
		if st.proto == "tcp" {
			return "reject tcp-reset", nil
		}
		return "reject", nil
	}
	if _, err := w.chain("nat", "POSTROUTING", st, b, 0); err != nil {
		return "", err
	}
	out := "accept"
	if st.dnat != "" {
		out += " dnat " + st.dnat
	}
	if st.masq {
		out += " masquerade"
	}
	return out, nil
}

func (w *iptWalker) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(w.local, a)
}

// chain runs one chain and returns a terminal verdict ("ACCEPT", "DROP", "REJECT") or
// "" when the packet falls off its end or returns.
func (w *iptWalker) chain(table, name string, st *walkState, b *walkBranches, depth int) (string, error) {
	if depth > 10 {
		return "", fmt.Errorf("jumps nested too deep at %s", name)
	}
	rules, ok := w.f.Chain(table, name)
	if !ok {
		return "", fmt.Errorf("%s: no chain %s", table, name)
	}
	for _, r := range rules {
		tok, err := splitRule(r)
		if err != nil {
			return "", err
		}
		v, err := w.rule(table, tok[2:], st, b, depth)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", table, r, err)
		}
		switch v {
		case "":
		case "RETURN":
			return "", nil
		default:
			return v, nil
		}
	}
	return "", nil
}

// rule runs one rule: "" when it does not match or its target continues.
func (w *iptWalker) rule(table string, tok []string, st *walkState, b *walkBranches, depth int) (string, error) {
	neg := false
	for i := 0; i < len(tok); i++ {
		arg := func() string {
			if i+1 < len(tok) {
				return tok[i+1]
			}
			return ""
		}
		ok := true
		switch t := tok[i]; t {
		case "!":
			neg = true
			continue
		case "-m":
			if !slices.Contains([]string{"comment", "tcp", "udp", "sctp", "conntrack", "addrtype", "statistic", "recent", "mark"}, arg()) {
				return "", fmt.Errorf("unknown match module %q", arg())
			}
			i++
			if tok[i] != "recent" {
				continue
			}
			// recent's options, in the generator's order or iptables-save's: --rcheck
			// never matches (a new client), --set does.
			set, check := false, false
			for i+1 < len(tok) {
				switch tok[i+1] {
				case "--name", "--seconds", "--mask":
					i += 2
					continue
				case "--set":
					set = true
				case "--rcheck":
					check = true
				case "--reap", "--rsource":
				default:
					goto done
				}
				i++
			}
		done:
			if set == check {
				return "", fmt.Errorf("recent needs one of --set and --rcheck: %v", tok)
			}
			ok = set
		case "--comment":
			i++
			continue
		case "-p":
			ok = st.proto == arg()
			i++
		case "-s", "-d":
			pfx, err := parsePrefixOrAddr(arg())
			if err != nil {
				return "", err
			}
			a := st.src
			if t == "-d" {
				a = st.dst
			}
			ok = pfx.Contains(a)
			i++
		case "--dport":
			ok = arg() == strconv.Itoa(int(st.dport))
			i++
		case "--ctstate":
			ok = slices.Contains(strings.Split(arg(), ","), "NEW")
			i++
		case "--src-type", "--dst-type":
			if arg() != "LOCAL" {
				return "", fmt.Errorf("unknown address type %q", arg())
			}
			a := st.src
			if t == "--dst-type" {
				a = st.dst
			}
			ok = w.isLocal(a)
			i++
		case "--mode":
			if arg() != "random" || i+3 >= len(tok) || tok[i+2] != "--probability" {
				return "", fmt.Errorf("unknown statistic %v", tok[i:])
			}
			ok = b.choose()
			i += 3
		case "--mark":
			v, m, found := strings.Cut(arg(), "/")
			if !found {
				return "", fmt.Errorf("mark without mask %q", arg())
			}
			vv, err1 := strconv.ParseUint(v, 0, 64)
			mm, err2 := strconv.ParseUint(m, 0, 64)
			if err1 != nil || err2 != nil {
				return "", fmt.Errorf("bad mark %q", arg())
			}
			ok = st.mark&mm == vv
			i++
		case "-j":
			return w.target(table, tok[i+1:], st, b, depth)
		default:
			return "", fmt.Errorf("unknown token %q", t)
		}
		if ok == neg {
			return "", nil
		}
		neg = false
	}
	return "", nil // no target: a counting or comment-only rule
}

func (w *iptWalker) target(table string, tok []string, st *walkState, b *walkBranches, depth int) (string, error) {
	if len(tok) == 0 {
		return "", fmt.Errorf("-j without target")
	}
	switch tok[0] {
	case "ACCEPT", "DROP", "REJECT", "RETURN":
		return tok[0], nil
	case "MARK":
		if len(tok) != 3 {
			return "", fmt.Errorf("bad MARK %v", tok)
		}
		val, mask, _ := strings.Cut(tok[2], "/")
		v, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return "", err
		}
		switch tok[1] {
		case "--or-mark":
			st.mark |= v
		case "--xor-mark":
			st.mark ^= v
		case "--set-xmark": // how iptables-save prints both: value/mask
			m, err := strconv.ParseUint(mask, 0, 64)
			if err != nil {
				return "", err
			}
			st.mark = (st.mark &^ m) ^ v
		default:
			return "", fmt.Errorf("bad MARK %v", tok)
		}
		return "", nil
	case "MASQUERADE":
		if table != "nat" || len(tok) != 2 || tok[1] != "--random-fully" {
			return "", fmt.Errorf("bad MASQUERADE %v", tok)
		}
		st.masq = true
		return "ACCEPT", nil
	case "DNAT":
		if table != "nat" || len(tok) != 3 || tok[1] != "--to-destination" {
			return "", fmt.Errorf("bad DNAT %v", tok)
		}
		ap, err := netip.ParseAddrPort(tok[2])
		if err != nil {
			return "", err
		}
		st.dst, st.dport, st.dnat = ap.Addr(), ap.Port(), tok[2]
		return "ACCEPT", nil
	}
	if len(tok) != 1 {
		return "", fmt.Errorf("unexpected words after -j %s: %v", tok[0], tok[1:])
	}
	v, err := w.chain(table, tok[0], st, b, depth+1)
	if err != nil {
		return "", err
	}
	return v, nil
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, 32), nil
}
