package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// IPTables restores and saves the iptables tables of the network namespace it runs in.
type IPTables interface {
	// Restore runs data through `iptables-restore --noflush`: chains it declares are
	// created or emptied, chains it does not mention are left alone. Input that fails
	// changes nothing in the table that failed.
	Restore(ctx context.Context, data []byte) error
	// Check is Restore's dry run (`iptables-restore --test`): the input is parsed and
	// its match and target extensions loaded, nothing changes. What only the kernel
	// checks (a jump to a missing chain, a missing xt_ module) passes it.
	Check(ctx context.Context, data []byte) error
	// Save returns `iptables-save -t table`.
	Save(ctx context.Context, table string) ([]byte, error)
}

var (
	_ IPTables = (*IPTablesKernel)(nil)
	_ IPTables = (*FakeIPTables)(nil)
)

// IPTablesKernel runs Debian's iptables-restore and iptables-save (package iptables) in
// the calling process's network namespace.
type IPTablesKernel struct {
	restore, save string
}

// NewIPTablesKernel finds iptables-restore and iptables-save. When a node has both
// backends installed, it uses the one that already holds rules (legacy when the legacy
// tables have more), as kube-proxy's iptables wrapper does; else the default.
func NewIPTablesKernel() (*IPTablesKernel, error) {
	k := &IPTablesKernel{restore: "iptables-restore", save: "iptables-save"}
	for _, c := range []string{k.restore, k.save} {
		if _, err := exec.LookPath(c); err != nil {
			return nil, fmt.Errorf("the iptables proxy mode needs %s, from Debian's iptables package (apt-get install iptables): %w", c, err)
		}
	}
	_, errL := exec.LookPath("iptables-legacy-save")
	_, errN := exec.LookPath("iptables-nft-save")
	if errL == nil && errN == nil && countRules("iptables-legacy-save") > countRules("iptables-nft-save") {
		k.restore, k.save = "iptables-legacy-restore", "iptables-legacy-save"
	}
	return k, nil
}

// countRules counts the rules iptables-save prints (0 when it fails).
func countRules(save string) int {
	out, err := exec.Command(save).Output()
	if err != nil {
		return 0
	}
	return bytes.Count(out, []byte("\n-A "))
}

// Restore implements IPTables: `iptables-restore --noflush -w 5`.
func (k *IPTablesKernel) Restore(ctx context.Context, data []byte) error {
	return k.run(ctx, data, "--noflush", "-w", "5")
}

// Check implements IPTables: `iptables-restore --noflush --test -w 5`.
func (k *IPTablesKernel) Check(ctx context.Context, data []byte) error {
	return k.run(ctx, data, "--noflush", "--test", "-w", "5")
}

func (k *IPTablesKernel) run(ctx context.Context, data []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, k.restore, args...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", k.restore, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Save implements IPTables.
func (k *IPTablesKernel) Save(ctx context.Context, table string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.save, "-t", table)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %w: %s", k.save, table, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// builtinChains are the built-in chains of the tables the proxy uses.
var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

// standardTargets are the -j targets that are not chains.
var standardTargets = map[string]bool{
	"ACCEPT": true, "DROP": true, "RETURN": true, "REJECT": true, "DNAT": true, "SNAT": true, "MASQUERADE": true, "MARK": true,
}

// fakeTable is one table of FakeIPTables: chains and their rules (the text after
// "-A CHAIN ").
type fakeTable struct {
	chains map[string][]string
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: make(map[string][]string, len(t.chains))}
	for k, v := range t.chains {
		c.chains[k] = slices.Clone(v)
	}
	return c
}

// FakeIPTables is an in-memory IPTables that parses and validates restore input as
// iptables-restore --noflush does: declared chains are emptied, rules must go to
// existing chains and jump to existing chains or standard targets, a chain deleted
// must exist, be empty and have no rule jumping to it, and each table is committed at
// its COMMIT (a failing table changes nothing, tables committed before it stay). Check
// validates as Restore does, which is stricter than iptables-restore --test. Safe for
// concurrent use.
type FakeIPTables struct {
	mu     sync.Mutex
	tables map[string]*fakeTable
	// Restores records every successful restore input, oldest first.
	Restores [][]byte
	// FailNext, when set, makes the next Restore fail with it (and change nothing).
	FailNext error
	// Refuse, when set, stands for a kernel that lacks something: Restore and Check
	// fail on the first rule line it returns true for, as iptables-restore does.
	Refuse func(line string) bool
}

// NewFakeIPTables returns a fake with empty filter and nat tables.
func NewFakeIPTables() *FakeIPTables {
	f := &FakeIPTables{tables: map[string]*fakeTable{}}
	for t, cs := range builtinChains {
		ft := &fakeTable{chains: map[string][]string{}}
		for _, c := range cs {
			ft.chains[c] = nil
		}
		f.tables[t] = ft
	}
	return f
}

// Restore implements IPTables.
func (f *FakeIPTables) Restore(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.FailNext; err != nil {
		f.FailNext = nil
		return err
	}
	work, err := f.apply(data)
	f.tables = work
	if err != nil {
		return err
	}
	f.Restores = append(f.Restores, slices.Clone(data))
	return nil
}

// Check implements IPTables.
func (f *FakeIPTables) Check(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.apply(data)
	return err
}

// apply returns the tables as data leaves them, with the error of the line that
// failed: like iptables-restore, each table is committed at its COMMIT, so tables
// committed before a failing one stay as written. f.mu must be held.
func (f *FakeIPTables) apply(data []byte) (map[string]*fakeTable, error) {
	work := maps.Clone(f.tables)
	var cur *fakeTable
	var curName string
	for i, l := range strings.Split(string(data), "\n") {
		lineNo := i + 1
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("iptables-restore: line %d failed (%s): %s", lineNo, l, fmt.Sprintf(format, args...))
		}
		if f.Refuse != nil && f.Refuse(l) {
			return work, fail("the kernel refuses it")
		}
		switch {
		case strings.HasPrefix(l, "*"):
			if cur != nil {
				return work, fail("table %s not committed", curName)
			}
			curName = l[1:]
			t := work[curName]
			if t == nil {
				return work, fail("unknown table %q", curName)
			}
			cur = t.clone()
			continue
		case cur == nil:
			return work, fail("not inside a table")
		case l == "COMMIT":
			work[curName] = cur
			cur = nil
			continue
		case strings.HasPrefix(l, ":"):
			f := strings.Fields(l[1:])
			if len(f) != 3 {
				return work, fail("bad chain line")
			}
			if slices.Contains(builtinChains[curName], f[0]) {
				continue
			}
			if f[1] != "-" {
				return work, fail("a user-defined chain has no policy")
			}
			if len(f[0]) > 28 {
				return work, fail("chain name %q longer than 28 characters", f[0])
			}
			cur.chains[f[0]] = nil
			continue
		}
		tok, err := splitRule(l)
		if err != nil {
			return work, fail("%v", err)
		}
		if len(tok) < 2 {
			return work, fail("missing chain")
		}
		chain := tok[1]
		rules, ok := cur.chains[chain]
		if !ok {
			return work, fail("chain %q does not exist", chain)
		}
		switch tok[0] {
		case "-X":
			if slices.Contains(builtinChains[curName], chain) {
				return work, fail("cannot delete built-in chain %q", chain)
			}
			if len(rules) > 0 {
				return work, fail("chain %q is not empty", chain)
			}
			for c, rs := range cur.chains {
				for _, r := range rs {
					if ruleTarget(r) == chain {
						return work, fail("chain %q is referenced by a rule of %q", chain, c)
					}
				}
			}
			delete(cur.chains, chain)
		case "-A", "-I", "-D":
			spec := tok[2:]
			pos := 0
			if tok[0] == "-I" && len(spec) > 0 {
				if n, err := strconv.Atoi(spec[0]); err == nil {
					if n < 1 || n > len(rules)+1 {
						return work, fail("index %d out of range", n)
					}
					pos, spec = n-1, spec[1:]
				}
			}
			rule := strings.Join(quoteTokens(spec), " ")
			if err := validateRule(spec, cur); err != nil {
				return work, fail("%v", err)
			}
			switch tok[0] {
			case "-A":
				cur.chains[chain] = append(rules, rule)
			case "-I":
				cur.chains[chain] = slices.Insert(rules, pos, rule)
			case "-D":
				i := slices.Index(rules, rule)
				if i < 0 {
					return work, fail("no such rule in chain %q", chain)
				}
				cur.chains[chain] = slices.Delete(rules, i, i+1)
			}
		default:
			return work, fail("unknown command %q", tok[0])
		}
	}
	if cur != nil {
		return work, fmt.Errorf("iptables-restore: table %s: COMMIT expected at end of input", curName)
	}
	return work, nil
}

// Save implements IPTables, in iptables-save's layout: built-in chains first, then the
// others sorted; rules per chain in the same order.
func (f *FakeIPTables) Save(_ context.Context, table string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[table]
	if t == nil {
		return nil, fmt.Errorf("iptables-save: table %q does not exist", table)
	}
	order := slices.Clone(builtinChains[table])
	var user []string
	for c := range maps.Keys(t.chains) {
		if !slices.Contains(order, c) {
			user = append(user, c)
		}
	}
	slices.Sort(user)
	order = append(order, user...)
	var b bytes.Buffer
	b.WriteString("*" + table + "\n")
	for _, c := range order {
		policy := "-"
		if slices.Contains(builtinChains[table], c) {
			policy = "ACCEPT"
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
	}
	for _, c := range order {
		for _, r := range t.chains[c] {
			fmt.Fprintf(&b, "-A %s %s\n", c, r)
		}
	}
	b.WriteString("COMMIT\n")
	return b.Bytes(), nil
}

// Chain returns the rules of one chain ("-A CHAIN ..." lines) and whether it exists.
func (f *FakeIPTables) Chain(table, chain string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[table]
	if t == nil {
		return nil, false
	}
	rules, ok := t.chains[chain]
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = "-A " + chain + " " + r
	}
	return out, ok
}

// splitRule splits a restore line into words, keeping "quoted strings" as one word
// without their quotes.
func splitRule(l string) ([]string, error) {
	var out []string
	for l = strings.TrimSpace(l); l != ""; l = strings.TrimSpace(l) {
		if l[0] == '"' {
			end := strings.IndexByte(l[1:], '"')
			if end < 0 {
				return nil, errors.New("unterminated quoted string")
			}
			out = append(out, l[1:end+1])
			l = l[end+2:]
			continue
		}
		end := strings.IndexAny(l, " \t")
		if end < 0 {
			end = len(l)
		}
		out = append(out, l[:end])
		l = l[end:]
	}
	return out, nil
}

// quoteTokens quotes the words that need it, as iptables-save prints them.
func quoteTokens(tok []string) []string {
	out := make([]string, len(tok))
	for i, t := range tok {
		if t == "" || strings.ContainsAny(t, " \t") {
			t = `"` + t + `"`
		}
		out[i] = t
	}
	return out
}

// ruleOptions are the options the proxy's rules use, with the number of values each
// takes; validateRule refuses any other, as iptables refuses unknown options.
var ruleOptions = map[string]int{
	"-m": 1, "-p": 1, "-s": 1, "-d": 1, "-j": 1, "--comment": 1, "--dport": 1, "--ctstate": 1,
	"--mode": 1, "--probability": 1, "--name": 1, "--set": 0, "--rcheck": 0, "--seconds": 1, "--reap": 0,
	"--src-type": 1, "--dst-type": 1, "--mark": 1, "--xor-mark": 1, "--set-xmark": 1, "--or-mark": 1, "--to-destination": 1,
	"--random-fully": 0, "!": 0, "--reject-with": 1, "--mask": 1, "--rsource": 0,
}

// validateRule checks a rule's options and that its target exists in table t.
func validateRule(spec []string, t *fakeTable) error {
	target := ""
	for i := 0; i < len(spec); i++ {
		n, ok := ruleOptions[spec[i]]
		if !ok {
			return fmt.Errorf("unknown option %q", spec[i])
		}
		if i+n >= len(spec) {
			return fmt.Errorf("option %q requires an argument", spec[i])
		}
		if spec[i] == "-j" {
			target = spec[i+1]
		}
		if spec[i] == "--probability" {
			if p, err := strconv.ParseFloat(spec[i+1], 64); err != nil || p < 0 || p > 1 {
				return fmt.Errorf("bad probability %q", spec[i+1])
			}
		}
		i += n
	}
	if target != "" && !standardTargets[target] {
		if _, ok := t.chains[target]; !ok {
			return fmt.Errorf("couldn't load target `%s': no such chain", target)
		}
	}
	return nil
}

// ruleTarget returns the -j target of a stored rule.
func ruleTarget(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" {
			return f[i+1]
		}
	}
	return ""
}

// CleanupIPTables removes what the iptables mode (or kube-proxy) left in the
// namespace's filter and nat tables, as `kube-proxy --cleanup` does: every rule of a
// built-in chain jumping to a KUBE-* chain, then every KUBE-* chain. Tables without
// any are not touched; a node without iptables has nothing to clean.
func CleanupIPTables(ctx context.Context, ipt IPTables) error {
	var input bytes.Buffer
	for _, table := range []string{"filter", "nat"} {
		saved, err := ipt.Save(ctx, table)
		if err != nil {
			return fmt.Errorf("cleaning up iptables rules: %w", err)
		}
		var kube []string
		var dels []string
		for l := range strings.Lines(string(saved)) {
			l = strings.TrimSpace(l)
			switch {
			case strings.HasPrefix(l, ":KUBE-"):
				kube = append(kube, strings.Fields(l[1:])[0])
			case strings.HasPrefix(l, "-A "):
				f := strings.Fields(l)
				if slices.Contains(builtinChains[table], f[1]) && strings.HasPrefix(ruleTarget(l), "KUBE-") {
					dels = append(dels, "-D"+l[2:])
				}
			}
		}
		if len(kube)+len(dels) == 0 {
			continue
		}
		input.WriteString("*" + table + "\n")
		for _, d := range dels {
			input.WriteString(d + "\n")
		}
		for _, c := range kube {
			input.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range kube {
			input.WriteString("-X " + c + "\n")
		}
		input.WriteString("COMMIT\n")
	}
	if input.Len() == 0 {
		return nil
	}
	if err := ipt.Restore(ctx, input.Bytes()); err != nil {
		return fmt.Errorf("cleaning up iptables rules: %w", err)
	}
	return nil
}
