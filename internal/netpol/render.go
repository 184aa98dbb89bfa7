package netpol

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// TableName is the nftables table (family ip) of the node's policies. It never
// depends on the service proxy's table or rules, whichever proxy mode runs.
const TableName = "tranche-netpol"

// The fixed skeleton: two verdict maps from a pod's address to its chains, and the
// base chains that look them up.
const (
	ingressMap = "ingress-pods"
	egressMap  = "egress-pods"
)

// baseChain is one chain of the fixed skeleton.
type baseChain struct {
	name     string
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
	rules    []string
}

// baseChains hook the policy chains on forward only: every packet between pods and
// every packet between a pod and anything beyond its node crosses it, after the proxy's
// DNAT (prerouting, dstnat), so that a ClusterIP connection is judged by the pod it
// reaches. Input and output are not hooked: traffic between a pod and its own node is
// always allowed, as Kubernetes documents ("traffic to and from the node where a Pod is
// running is always allowed, regardless of the IP address of the Pod or the node"), so
// the kubelet's probes and a pod talking to its node are never filtered. Egress runs
// first: an accept ends only its base chain, so the ingress chain at filter+1 still
// judges the packet; a drop ends it. Replies and established flows are accepted first,
// which also makes the counters count new connections only.
var baseChains = []baseChain{
	{"forward-egress", knftables.ForwardHook, knftables.FilterPriority, []string{"ct state established,related accept", "ip saddr vmap @" + egressMap}},
	{"forward-ingress", knftables.ForwardHook, knftables.FilterPriority + "+1", []string{"ct state established,related accept", "ip daddr vmap @" + ingressMap}},
}

// setSpec is a set's type and flags.
type setSpec struct {
	typ      string
	interval bool
	comment  string
}

// counterSpec is what a named counter counts, for the metrics.
type counterSpec struct {
	allow           bool
	namespace, name string // policy (allow) or pod (deny)
	direction       Direction
	rule            string // the allowing rule's field path
}

// state is the regular part of the table: everything but the skeleton's chains. The
// desired state is rendered from a model; the applied state is what the last
// successful sync wrote.
type state struct {
	// chains maps a regular chain to its rules, in order.
	chains map[string][]string
	// sets maps a set to its spec; elems a set or map to its elements (key → value,
	// "" for sets), keys and values in nft syntax ("10.244.1.2", "tcp . 80-90").
	sets     map[string]setSpec
	elems    map[string]map[string]string
	counters map[string]counterSpec
	// owner maps a chain, set or counter to the policy or pod ("pol:ns/name",
	// "pod:ns/name") it belongs to, so that one can be left out on its own.
	owner map[string]string
}

func newState() *state {
	return &state{chains: map[string][]string{}, sets: map[string]setSpec{}, elems: map[string]map[string]string{},
		counters: map[string]counterSpec{}, owner: map[string]string{}}
}

// objectName returns a table-unique, length-bounded name: prefix, then "ns.name"
// (namespaces have no dots, so this is unambiguous), then suffix; names too long keep
// a hash of the whole instead of their tail.
func objectName(prefix, ns, name, suffix string) string {
	s := prefix + ns + "." + name + suffix
	const limit = 120
	if len(s) <= limit {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:6])
	keep := limit - len(suffix) - len(h) - 1
	return s[:keep] + "-" + h + suffix
}

func dirTag(d Direction) string {
	if d == Ingress {
		return "in"
	}
	return "eg"
}

func policyChain(ns, name string, d Direction) string {
	return objectName("pol-"+dirTag(d)+"-", ns, name, "")
}

func podChain(ns, name string, d Direction) string {
	return objectName("pod-"+dirTag(d)+"-", ns, name, "")
}

func ruleSet(ns, name string, d Direction, i int, kind string) string {
	return objectName("pol-"+dirTag(d)+"-", ns, name, fmt.Sprintf("-%d-%s", i, kind))
}

// groupChain names the chain of jumps shared by the pods selected by the same
// policies in direction d: its name is a hash of the jumps, so it never changes content.
func groupChain(d Direction, jumps []string) string {
	sum := sha256.Sum256([]byte(strings.Join(jumps, "\n")))
	return "grp-" + dirTag(d) + "-" + hex.EncodeToString(sum[:8])
}

func allowCounter(ns, name string, d Direction, rule int) string {
	return objectName("allow-"+dirTag(d)+"-", ns, name, fmt.Sprintf("-%d", rule))
}

func denyCounter(ns, name string, d Direction) string {
	return objectName("deny-"+dirTag(d)+"-", ns, name, "")
}

func proto(p v1.Protocol) string { return strings.ToLower(string(p)) }

// render returns the desired state of the model, leaving out the policies in skip
// (those the kernel refused on their own: their pods stay isolated, and the policy
// allows nothing).
func render(m *Model, skip map[string]bool) *state {
	st := newState()
	st.elems[ingressMap], st.elems[egressMap] = map[string]string{}, map[string]string{}
	for key, pol := range m.Policies {
		if !skip[key] {
			st.merge(renderPolicy(key, pol))
		}
	}
	for _, pod := range m.Pods {
		st.merge(renderPod(pod, m, skip))
	}
	return st
}

// renderPolicy returns the chains, sets and counters of one policy (key "ns/name").
func renderPolicy(key string, pol *Policy) *state {
	st := newState()
	owner := "pol:" + key
	for _, d := range []Direction{Ingress, Egress} {
		if (d == Ingress && !pol.HasIngress) || (d == Egress && !pol.HasEgress) {
			continue
		}
		chain := policyChain(pol.Namespace, pol.Name, d)
		st.owner[chain] = owner
		rules := []string{}
		peerField, namedField := "ip saddr", "ip daddr"
		if d == Egress {
			peerField = "ip daddr"
		}
		for i, r := range pol.Rules(d) {
			// A counter per rule; the metric adds up a policy's.
			ctr := allowCounter(pol.Namespace, pol.Name, d, i)
			st.counters[ctr] = counterSpec{allow: true, namespace: pol.Namespace, name: pol.Name, direction: d, rule: r.Path}
			st.owner[ctr] = owner
			peers := []string{""}
			if !r.AllPeers {
				peers = nil
				if r.HasPodPeers {
					set := st.addSet(ruleSet(pol.Namespace, pol.Name, d, i, "pods"), owner, setSpec{typ: "ipv4_addr", comment: key + " " + r.Path})
					for _, ip := range r.PeerPods {
						st.elems[set][ip.String()] = ""
					}
					peers = append(peers, peerField+" @"+set)
				}
				if r.HasCIDRPeers {
					set := st.addSet(ruleSet(pol.Namespace, pol.Name, d, i, "cidrs"), owner, setSpec{typ: "ipv4_addr", interval: true, comment: key + " " + r.Path})
					for _, p := range r.PeerCIDRs {
						st.elems[set][p.String()] = ""
					}
					peers = append(peers, peerField+" @"+set)
				}
			}
			ports := []string{""}
			if !r.AllPorts {
				ports = nil
				if len(r.Ports) > 0 {
					set := st.addSet(ruleSet(pol.Namespace, pol.Name, d, i, "ports"), owner, setSpec{typ: "inet_proto . inet_service", interval: true, comment: key + " " + r.Path})
					for _, pr := range r.Ports {
						k := fmt.Sprintf("%s . %d", proto(pr.Protocol), pr.From)
						if pr.To != pr.From {
							k = fmt.Sprintf("%s . %d-%d", proto(pr.Protocol), pr.From, pr.To)
						}
						st.elems[set][k] = ""
					}
					ports = append(ports, "meta l4proto . th dport @"+set)
				}
				if r.HasNamed {
					set := st.addSet(ruleSet(pol.Namespace, pol.Name, d, i, "named"), owner, setSpec{typ: "ipv4_addr . inet_proto . inet_service", comment: key + " " + r.Path})
					for _, np := range r.Named {
						st.elems[set][fmt.Sprintf("%s . %s . %d", np.IP, proto(np.Protocol), np.Port)] = ""
					}
					ports = append(ports, namedField+" . meta l4proto . th dport @"+set)
				}
			}
			for _, pe := range peers {
				for _, po := range ports {
					rules = append(rules, strings.TrimSpace(strings.Join([]string{pe, po, fmt.Sprintf("counter name %q accept", ctr)}, " ")))
				}
			}
		}
		st.chains[chain] = rules
	}
	return st
}

// renderPod returns one isolated pod's chains, counters and map entries, with the
// group chain it jumps to (owner "group"), leaving out the policies in skip.
func renderPod(pod *Pod, m *Model, skip map[string]bool) *state {
	st := newState()
	owner := "pod:" + pod.Key()
	for _, d := range []Direction{Ingress, Egress} {
		var jumps []string
		keys := pod.Ingress
		if d == Egress {
			keys = pod.Egress
		}
		if len(keys) == 0 {
			continue
		}
		for _, k := range keys {
			if pol := m.Policies[k]; pol != nil && !skip[k] {
				jumps = append(jumps, "jump "+policyChain(pol.Namespace, pol.Name, d))
			}
		}
		// Pods selected by the same policies (the pods of one workload, usually)
		// share one chain of jumps, so that the table grows with pods plus policies,
		// not with their product (1,000 policies selecting 100 pods: 1,000 jumps, not
		// 100,000). A pod selected by one policy jumps to it directly.
		if len(jumps) > 1 {
			group := groupChain(d, jumps)
			st.chains[group] = jumps
			st.owner[group] = "group"
			jumps = []string{"jump " + group}
		}
		chain := podChain(pod.Namespace, pod.Name, d)
		ctr := denyCounter(pod.Namespace, pod.Name, d)
		st.counters[ctr] = counterSpec{namespace: pod.Namespace, name: pod.Name, direction: d}
		// A pod cannot block access to itself (through a Service, its own
		// connections cross the node).
		self := "ip daddr " + pod.IP.String() + " accept"
		if d == Ingress {
			self = "ip saddr " + pod.IP.String() + " accept"
		}
		rules := append([]string{self}, jumps...)
		st.chains[chain] = append(rules, fmt.Sprintf("counter name %q drop", ctr))
		st.owner[chain], st.owner[ctr] = owner, owner
		mp := ingressMap
		if d == Egress {
			mp = egressMap
		}
		if st.elems[mp] == nil {
			st.elems[mp] = map[string]string{}
		}
		st.elems[mp][pod.IP.String()] = "goto " + chain
	}
	return st
}

// merge adds f's objects and elements to st (f's names are its own: a policy's or a
// pod's, or a group chain whose name is its content).
func (st *state) merge(f *state) {
	for k, v := range f.chains {
		st.chains[k] = v
	}
	for k, v := range f.sets {
		st.sets[k] = v
	}
	for k, v := range f.counters {
		st.counters[k] = v
	}
	for k, v := range f.owner {
		st.owner[k] = v
	}
	for c, elems := range f.elems {
		if st.elems[c] == nil {
			st.elems[c] = make(map[string]string, len(elems))
		}
		for k, v := range elems {
			st.elems[c][k] = v
		}
	}
}

// remove takes f's objects out of st: its chains, sets (with their elements) and
// counters, and its entries of the verdict maps.
func (st *state) remove(f *state) {
	for k := range f.chains {
		delete(st.chains, k)
		delete(st.owner, k)
	}
	for k := range f.sets {
		delete(st.sets, k)
		delete(st.owner, k)
		delete(st.elems, k)
	}
	for k := range f.counters {
		delete(st.counters, k)
		delete(st.owner, k)
	}
	for _, mp := range []string{ingressMap, egressMap} {
		for k := range f.elems[mp] {
			delete(st.elems[mp], k)
		}
	}
}

func (st *state) addSet(name, owner string, spec setSpec) string {
	st.sets[name] = spec
	st.elems[name] = map[string]string{}
	st.owner[name] = owner
	return name
}

// skeleton adds the table, its maps and base chains (with their rules) to tx.
func skeleton(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("tranche: NetworkPolicies of this node")})
	tx.Add(&knftables.Map{Name: ingressMap, Type: "ipv4_addr : verdict", Comment: knftables.PtrTo("pod address → its ingress chain")})
	tx.Add(&knftables.Map{Name: egressMap, Type: "ipv4_addr : verdict", Comment: knftables.PtrTo("pod address → its egress chain")})
	for _, bc := range baseChains {
		c := &knftables.Chain{Name: bc.name, Type: knftables.PtrTo(knftables.FilterType), Hook: knftables.PtrTo(bc.hook), Priority: knftables.PtrTo(bc.priority)}
		tx.Add(c)
		tx.Flush(c)
		for _, r := range bc.rules {
			tx.Add(&knftables.Rule{Chain: bc.name, Rule: r})
		}
	}
}

func isMap(name string) bool { return name == ingressMap || name == egressMap }

func element(container, key, value string) *knftables.Element {
	e := &knftables.Element{Key: strings.Split(key, " . ")}
	if isMap(container) {
		e.Map, e.Value = container, []string{value}
	} else {
		e.Set = container
	}
	return e
}

func setObject(name string, spec setSpec) *knftables.Set {
	s := &knftables.Set{Name: name, Type: spec.typ, Comment: knftables.PtrTo(spec.comment)}
	if spec.interval {
		s.Flags = []knftables.SetFlag{knftables.IntervalFlag}
	}
	return s
}

func counterObject(name string, c counterSpec) *knftables.Counter {
	comment := fmt.Sprintf("denied, pod %s/%s %s", c.namespace, c.name, c.direction)
	if c.allow {
		comment = fmt.Sprintf("allowed, policy %s/%s %s", c.namespace, c.name, c.rule)
	}
	return &knftables.Counter{Name: name, Comment: knftables.PtrTo(comment)}
}

// fullTx writes desired whole: every object added (counters keep their values),
// every chain and set flushed and refilled, and the objects of existing (names in
// the kernel) that desired lacks deleted last. When existing is nil the table is new
// (or deleted earlier in tx): nothing needs flushing.
func fullTx(tx *knftables.Transaction, desired *state, existing map[string][]string) {
	fresh := existing == nil
	skeleton(tx)
	for _, name := range sortedKeys(desired.counters) {
		tx.Add(counterObject(name, desired.counters[name]))
	}
	for _, name := range sortedKeys(desired.sets) {
		s := setObject(name, desired.sets[name])
		tx.Add(s)
		if !fresh {
			tx.Flush(s)
		}
	}
	for _, name := range sortedKeys(desired.elems) {
		if isMap(name) && !fresh {
			tx.Flush(&knftables.Map{Name: name})
		}
		for _, k := range sortedKeys(desired.elems[name]) {
			if !isMap(name) {
				tx.Add(element(name, k, ""))
			}
		}
	}
	chains := sortedKeys(desired.chains)
	for _, name := range chains {
		c := &knftables.Chain{Name: name}
		tx.Add(c)
		if !fresh {
			tx.Flush(c)
		}
	}
	for _, name := range chains {
		for _, r := range desired.chains[name] {
			tx.Add(&knftables.Rule{Chain: name, Rule: r})
		}
	}
	for _, mp := range []string{ingressMap, egressMap} {
		for _, k := range sortedKeys(desired.elems[mp]) {
			tx.Add(element(mp, k, desired.elems[mp][k]))
		}
	}
	deleteStale(tx, desired, existing["chain"], existing["set"], existing["counter"])
}

// deleteStale flushes and then deletes the chains, and deletes the sets and counters,
// that desired lacks, in an order the kernel accepts (no deleted object is still
// referenced).
func deleteStale(tx *knftables.Transaction, desired *state, chains, sets, counters []string) {
	var stale []string
	for _, c := range chains {
		if _, ok := desired.chains[c]; !ok && !isBaseChain(c) {
			stale = append(stale, c)
		}
	}
	slices.Sort(stale)
	for _, c := range stale {
		tx.Flush(&knftables.Chain{Name: c})
	}
	for _, c := range stale {
		tx.Delete(&knftables.Chain{Name: c})
	}
	for _, s := range sortedStrings(sets) {
		if _, ok := desired.sets[s]; !ok && !isMap(s) {
			tx.Delete(&knftables.Set{Name: s})
		}
	}
	for _, c := range sortedStrings(counters) {
		if _, ok := desired.counters[c]; !ok {
			tx.Delete(&knftables.Counter{Name: c})
		}
	}
}

func isBaseChain(name string) bool {
	for _, bc := range baseChains {
		if bc.name == name {
			return true
		}
	}
	return false
}

// partialTx writes only the differences from applied to desired: new objects and
// elements first, then changed chains, then the pods' map entries, and what is gone
// last, so that no packet ever meets a half-written policy.
func partialTx(tx *knftables.Transaction, desired, applied *state) {
	for _, name := range sortedKeys(desired.counters) {
		if _, ok := applied.counters[name]; !ok {
			tx.Add(counterObject(name, desired.counters[name]))
		}
	}
	for _, name := range sortedKeys(desired.sets) {
		// A set's name says its kind, hence its type: only its elements change.
		if _, ok := applied.sets[name]; !ok {
			tx.Add(setObject(name, desired.sets[name]))
			for _, k := range sortedKeys(desired.elems[name]) {
				tx.Add(element(name, k, ""))
			}
			continue
		}
		for _, k := range sortedKeys(desired.elems[name]) {
			if _, ok := applied.elems[name][k]; !ok {
				tx.Add(element(name, k, ""))
			}
		}
	}
	var changed []string
	for _, name := range sortedKeys(desired.chains) {
		rules, ok := applied.chains[name]
		if !ok {
			tx.Add(&knftables.Chain{Name: name})
		}
		if !ok || !slices.Equal(rules, desired.chains[name]) {
			changed = append(changed, name)
		}
	}
	for _, name := range changed {
		if _, ok := applied.chains[name]; ok {
			tx.Flush(&knftables.Chain{Name: name})
		}
		for _, r := range desired.chains[name] {
			tx.Add(&knftables.Rule{Chain: name, Rule: r})
		}
	}
	for _, mp := range []string{ingressMap, egressMap} {
		want, have := desired.elems[mp], applied.elems[mp]
		for _, k := range sortedKeys(have) {
			if v, ok := want[k]; !ok || v != have[k] {
				tx.Delete(element(mp, k, have[k]))
			}
		}
		for _, k := range sortedKeys(want) {
			if v, ok := have[k]; !ok || v != want[k] {
				tx.Add(element(mp, k, want[k]))
			}
		}
	}
	for _, name := range sortedKeys(applied.sets) {
		if _, ok := desired.sets[name]; !ok {
			continue
		}
		for _, k := range sortedKeys(applied.elems[name]) {
			if _, ok := desired.elems[name][k]; !ok {
				tx.Delete(element(name, k, ""))
			}
		}
	}
	var goneSets []string
	for name := range applied.sets {
		if _, ok := desired.sets[name]; !ok {
			goneSets = append(goneSets, name)
		}
	}
	deleteStale(tx, desired, mapKeys(applied.chains), goneSets, mapKeys(applied.counters))
}

func sortedKeys[V any](m map[string]V) []string {
	out := mapKeys(m)
	slices.Sort(out)
	return out
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
