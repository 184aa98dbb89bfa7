package tracer

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// tokenize splits a rule on spaces, turning each `{ ... }` into one token "{...}".
func tokenize(rule string) []string {
	var out, group []string
	inGroup := false
	for _, f := range strings.Fields(rule) {
		switch {
		case f == "{":
			inGroup, group = true, nil
		case f == "}" && inGroup:
			inGroup = false
			out = append(out, "{"+strings.Join(group, " ")+"}")
		case inGroup:
			group = append(group, f)
		default:
			out = append(out, f)
		}
	}
	return out
}

// groupEntries parses "{k : v , k : v}" into its entries.
func groupEntries(tok string) (map[string]string, error) {
	if !strings.HasPrefix(tok, "{") {
		return nil, fmt.Errorf("expected { ... }, got %q", tok)
	}
	out := map[string]string{}
	for _, e := range strings.Split(strings.Trim(tok, "{}"), ",") {
		k, v, ok := strings.Cut(e, " : ")
		if !ok {
			return nil, fmt.Errorf("map entry %q has no value", e)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func has(tok []string, i int, words ...string) bool {
	if i+len(words) > len(tok) {
		return false
	}
	for j, w := range words {
		if tok[i+j] != w {
			return false
		}
	}
	return true
}

// field returns the packet's value for a selector at tok[i:i+2], or false.
func field(tok []string, i int, st *state) (string, bool) {
	switch {
	case has(tok, i, "ip", "saddr"):
		return st.src.String(), true
	case has(tok, i, "ip", "daddr"):
		return st.dst.String(), true
	case has(tok, i, "meta", "l4proto"):
		return st.proto, true
	case has(tok, i, "th", "dport"):
		return strconv.Itoa(int(st.dport)), true
	}
	return "", false
}

// valueMatches compares one packet field with one rule or element field: equal, a
// port inside a range "from-to", or an address inside a prefix.
func valueMatches(pattern, v string) bool {
	if pattern == v {
		return true
	}
	if lo, hi, ok := strings.Cut(pattern, "-"); ok {
		from, err1 := strconv.Atoi(lo)
		to, err2 := strconv.Atoi(hi)
		n, err3 := strconv.Atoi(v)
		if err1 == nil && err2 == nil && err3 == nil {
			return from <= n && n <= to
		}
	}
	if p, err := netip.ParsePrefix(pattern); err == nil {
		if a, err := netip.ParseAddr(v); err == nil {
			return p.Contains(a)
		}
	}
	return false
}

// lookup finds the element of a named set or map matching the key fields; it returns
// the element's value ("" for a set) and whether one matched.
func (t *Tracer) lookup(tbl *knftables.FakeTable, name string, key []string) (string, bool, error) {
	type elem struct {
		key   []string
		value []string
	}
	var elems []elem
	if s := tbl.Sets[name]; s != nil {
		for _, e := range s.Elements {
			elems = append(elems, elem{e.Key, e.Value})
		}
	} else if m := tbl.Maps[name]; m != nil {
		for _, e := range m.Elements {
			elems = append(elems, elem{e.Key, e.Value})
		}
	} else {
		return "", false, fmt.Errorf("no set or map %q", name)
	}
	for _, e := range elems {
		fields := strings.Split(strings.Join(e.key, " . "), " . ")
		if len(fields) != len(key) {
			return "", false, fmt.Errorf("set %s: element %q does not have %d fields", name, strings.Join(e.key, " . "), len(key))
		}
		ok := true
		for i := range fields {
			ok = ok && valueMatches(fields[i], key[i])
		}
		if ok {
			return strings.Join(e.value, " "), true, nil
		}
	}
	return "", false, nil
}

// runRule evaluates one rule: "" when it does not match or falls through, otherwise the
// verdict it reaches. Every shape not listed here is an error.
func (t *Tracer) runRule(rule string, st *state, b *brancher, depth int) (string, error) {
	tok := tokenize(rule)
	for i := 0; i < len(tok); {
		last := func(n int) error {
			if i+n != len(tok) {
				return fmt.Errorf("unexpected %q after a verdict", strings.Join(tok[i+n:], " "))
			}
			return nil
		}
		switch {
		case has(tok, i, "ct", "state") && i+2 < len(tok):
			// The packet opens a new connection: `ct state established,related`
			// never matches it.
			states := strings.Split(tok[i+2], ",")
			for _, s := range states {
				if s != "new" && s != "established" && s != "related" && s != "invalid" && s != "untracked" {
					return "", fmt.Errorf("unsupported ct state %q", s)
				}
			}
			if !slices.Contains(states, "new") {
				return "", nil
			}
			i += 3
		case has(tok, i, "counter", "name") && i+2 < len(tok):
			name, err := strconv.Unquote(tok[i+2])
			if err != nil {
				return "", fmt.Errorf("counter name %s: %w", tok[i+2], err)
			}
			if st.tbl.Counters[name] == nil {
				return "", fmt.Errorf("no counter %q", name)
			}
			st.counters = append(st.counters, name)
			i += 3
		case has(tok, i, "counter"):
			i++
		case has(tok, i, "ct", "status", "dnat"):
			if !st.dnat {
				return "", nil
			}
			i += 3
		case has(tok, i, "fib") && i+3 < len(tok) && has(tok, i+2, "type", "local"):
			var a netip.Addr
			switch tok[i+1] {
			case "saddr":
				a = st.src
			case "daddr":
				a = st.dst
			default:
				return "", fmt.Errorf("unsupported fib selector %q", tok[i+1])
			}
			if !t.isLocal(a) {
				return "", nil
			}
			i += 4
		case has(tok, i, "meta", "mark", "set", "meta", "mark") && i+6 < len(tok):
			v, err := strconv.ParseUint(tok[i+6], 0, 32)
			if err != nil {
				return "", err
			}
			switch tok[i+5] {
			case "or":
				st.mark |= v
			case "xor":
				st.mark ^= v
			default:
				return "", fmt.Errorf("unsupported mark operation %q", tok[i+5])
			}
			i += 7
		case has(tok, i, "meta", "mark", "&") && i+5 < len(tok) && tok[i+4] == "==":
			mask, err1 := strconv.ParseUint(tok[i+3], 0, 32)
			want, err2 := strconv.ParseUint(tok[i+5], 0, 32)
			if err1 != nil || err2 != nil {
				return "", fmt.Errorf("bad mark comparison")
			}
			if st.mark&mask != want {
				return "", nil
			}
			i += 6
		case has(tok, i, "numgen", "random", "mod") && i+5 < len(tok) && tok[i+4] == "vmap":
			n, err := strconv.Atoi(tok[i+3])
			if err != nil || n < 1 {
				return "", fmt.Errorf("bad numgen modulus %q", tok[i+3])
			}
			entries, err := groupEntries(tok[i+5])
			if err != nil {
				return "", err
			}
			if err := last(6); err != nil {
				return "", err
			}
			v, ok := entries[strconv.Itoa(b.choose(n))]
			if !ok || len(entries) != n {
				return "", fmt.Errorf("numgen map does not cover 0..%d", n-1)
			}
			return t.verdict(v, st, b, depth)
		case has(tok, i, "jump") || has(tok, i, "goto"):
			if i+1 >= len(tok) {
				return "", fmt.Errorf("%s without a chain", tok[i])
			}
			if err := last(2); err != nil {
				return "", err
			}
			return t.verdict(tok[i]+" "+tok[i+1], st, b, depth)
		case has(tok, i, "drop") || has(tok, i, "return") || has(tok, i, "accept"):
			if err := last(1); err != nil {
				return "", err
			}
			return tok[i], nil
		case has(tok, i, "reject", "with", "tcp", "reset"):
			if st.proto != "tcp" {
				return "", fmt.Errorf("tcp reset for a %s packet", st.proto)
			}
			return "reject tcp-reset", last(4)
		case has(tok, i, "reject"):
			return "reject", last(1)
		case has(tok, i, "masquerade", "fully-random"):
			st.masq = true
			return "accept", last(2)
		case has(tok, i, "update") && i+2 < len(tok) && tok[i+2] == "{ip saddr}":
			if !strings.HasPrefix(tok[i+1], "@") {
				return "", fmt.Errorf("update of %q", tok[i+1])
			}
			if _, _, err := t.lookup(st.tbl, tok[i+1][1:], []string{st.src.String()}); err != nil {
				return "", err
			}
			i += 3
		case has(tok, i, "dnat", "ip", "to") && i+3 < len(tok):
			return t.dnat(tok[i+3:], st, b)
		default:
			n, err := t.match(tok, &i, st, depth, b)
			if n == noMatch {
				return "", nil
			}
			if n != "" || err != nil {
				return n, err
			}
		}
	}
	return "", nil
}

// noMatch is returned by match for a rule whose condition fails.
const noMatch = "\x00nomatch"

// match handles selector expressions: single fields compared with a value, prefix or
// set, and concatenations looked up in a set or used as a verdict map key. It advances
// *i past the expression; a non-empty result ends the rule (noMatch meaning "").
func (t *Tracer) match(tok []string, i *int, st *state, depth int, b *brancher) (string, error) {
	var key []string
	for {
		v, ok := field(tok, *i, st)
		if !ok {
			return "", fmt.Errorf("unsupported expression at %q", strings.Join(tok[*i:], " "))
		}
		key = append(key, v)
		*i += 2
		if !has(tok, *i, ".") {
			break
		}
		*i++
	}
	if *i >= len(tok) {
		return "", fmt.Errorf("expression without a comparison")
	}
	negate := tok[*i] == "!="
	if negate {
		*i++
		if *i >= len(tok) {
			return "", fmt.Errorf("!= without a value")
		}
	}
	operand := tok[*i]
	*i++
	var matched bool
	switch {
	case operand == "vmap" && !negate:
		if *i >= len(tok) || !strings.HasPrefix(tok[*i], "@") || *i+1 != len(tok) {
			return "", fmt.Errorf("vmap must end the rule with a named map")
		}
		v, ok, err := t.lookup(st.tbl, tok[*i][1:], key)
		if err != nil || !ok {
			return noMatchOr(err)
		}
		res, err := t.verdict(v, st, b, depth)
		if res == "" && err == nil {
			return noMatch, nil
		}
		return res, err
	case strings.HasPrefix(operand, "@"):
		_, ok, err := t.lookup(st.tbl, operand[1:], key)
		if err != nil {
			return "", err
		}
		matched = ok
	case len(key) == 1:
		matched = valueMatches(operand, key[0])
	default:
		return "", fmt.Errorf("concatenation compared with %q", operand)
	}
	if matched == negate {
		return noMatch, nil
	}
	return "", nil
}

func noMatchOr(err error) (string, error) {
	if err != nil {
		return "", err
	}
	return noMatch, nil
}

// lookupKey evaluates a concatenation of packet fields and `numgen random mod N`
// (every choice explored) into the key of a named-map lookup.
func lookupKey(tok []string, st *state, b *brancher) ([]string, error) {
	var key []string
	for i := 0; ; {
		if has(tok, i, "numgen", "random", "mod") && i+3 < len(tok) {
			n, err := strconv.Atoi(tok[i+3])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("bad numgen modulus %q", tok[i+3])
			}
			key = append(key, strconv.Itoa(b.choose(n)))
			i += 4
		} else if v, ok := field(tok, i, st); ok {
			key = append(key, v)
			i += 2
		} else {
			return nil, fmt.Errorf("unsupported lookup key at %q", strings.Join(tok[i:], " "))
		}
		if i == len(tok) {
			return key, nil
		}
		if !has(tok, i, ".") {
			return nil, fmt.Errorf("unexpected %q in a lookup key", strings.Join(tok[i:], " "))
		}
		i++
	}
}

// dnat applies `dnat ip to A:P`, `dnat ip to numgen random mod N map { i : A . P ... }`
// or `dnat ip to <fields> . numgen random mod N map @M` (an endpoint picker); the rule
// must end there. A DNAT ends the nat base chain.
func (t *Tracer) dnat(tok []string, st *state, b *brancher) (string, error) {
	if st.proto == "icmp" {
		return "", fmt.Errorf("dnat with a port for an icmp packet")
	}
	var target string
	switch {
	case len(tok) == 1:
		target = tok[0]
	case len(tok) == 6 && has(tok, 0, "numgen", "random", "mod") && tok[4] == "map":
		n, err := strconv.Atoi(tok[3])
		if err != nil || n < 1 {
			return "", fmt.Errorf("bad numgen modulus %q", tok[3])
		}
		entries, err := groupEntries(tok[5])
		if err != nil {
			return "", err
		}
		if len(entries) != n {
			return "", fmt.Errorf("numgen map does not cover 0..%d", n-1)
		}
		ip, port, ok := strings.Cut(entries[strconv.Itoa(b.choose(n))], " . ")
		if !ok {
			return "", fmt.Errorf("dnat map value is not ip . port")
		}
		target = ip + ":" + port
	case len(tok) >= 6 && tok[len(tok)-2] == "map" && strings.HasPrefix(tok[len(tok)-1], "@"):
		key, err := lookupKey(tok[:len(tok)-2], st, b)
		if err != nil {
			return "", err
		}
		v, ok, err := t.lookup(st.tbl, tok[len(tok)-1][1:], key)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("no element %s in %s: the lookup fails", strings.Join(key, " . "), tok[len(tok)-1])
		}
		ip, port, ok := strings.Cut(v, " . ")
		if !ok {
			return "", fmt.Errorf("dnat map value %q is not ip . port", v)
		}
		target = ip + ":" + port
	default:
		return "", fmt.Errorf("unsupported dnat target %q", strings.Join(tok, " "))
	}
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return "", fmt.Errorf("dnat target: %w", err)
	}
	st.dst, st.dport, st.dnat = ap.Addr(), ap.Port(), true
	return "accept", nil
}
