package proxy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"
)

// elemState is one element as written to the kernel, shared by refs services (two
// services may need the same hairpin element).
type elemState struct {
	value string
	refs  int
}

// tableState is the in-memory copy of what the proxy last wrote: per-service rules,
// every element of the fixed sets and maps, and the objects flushed by the previous sync
// that are deleted by the next one.
type tableState struct {
	services map[types.NamespacedName]*serviceRules
	elements map[elemKey]elemState
	// shared counts the services using each shared chain (endpoint pickers).
	shared map[string]int
	// staleChains and staleSets were flushed and are deleted a sync later, once no
	// element or rule can still refer to them.
	staleChains map[string]bool
	staleSets   map[string]bool
}

// newTableState returns an empty state with room for services and elements.
func newTableState(services, elements int) *tableState {
	return &tableState{
		services:    make(map[types.NamespacedName]*serviceRules, services),
		elements:    make(map[elemKey]elemState, elements),
		shared:      map[string]int{},
		staleChains: map[string]bool{},
		staleSets:   map[string]bool{},
	}
}

// existing lists the per-service chains and sets found in the kernel table.
type existing struct {
	chains, sets []string
}

// planSync returns the operations that bring the table from st to the desired rules
// of the changed services, and updates st as if they succeeded. A full plan (ex non-nil:
// what the kernel table holds) rewrites the skeleton and every service in changed, which
// must then hold every service, and flushes leftovers found in ex; a partial plan
// writes only what differs from st.
func planSync(cfg Config, st *tableState, changed map[types.NamespacedName]*serviceRules, ex *existing) *syncPlan {
	pl := &syncPlan{}
	names := slices.SortedFunc(maps.Keys(changed), compareNames)
	if ex != nil {
		planFull(pl, cfg, st, changed, names, ex)
	} else {
		planPartial(pl, cfg, st, changed, names)
	}
	return pl
}

// planFull starts st afresh, with every per-service object found in the kernel stale,
// and writes the skeleton and every service: each chain flushed and rewritten, each
// element added once, in the order services first use it.
func planFull(pl *syncPlan, cfg Config, st *tableState, changed map[types.NamespacedName]*serviceRules, names []types.NamespacedName, ex *existing) {
	tx := &pl.before
	writeSkeleton(tx, cfg)
	elements := 0
	for _, r := range changed {
		elements += len(r.elements)
	}
	*st = *newTableState(len(changed), elements)
	for _, c := range ex.chains {
		st.staleChains[c] = true
	}
	for _, s := range ex.sets {
		st.staleSets[s] = true
	}
	addServiceObjects(tx, changed, names)

	pl.adds = make([]elemOp, 0, elements)
	shared := false // an element is used by two services
	for _, n := range names {
		cur := changed[n]
		for _, c := range slices.Sorted(maps.Keys(cur.chains)) {
			delete(st.staleChains, c)
			writeChain(tx, c, cur.chains[c], true)
		}
		for _, op := range cur.elements {
			if _, ok := st.elements[op.key]; ok {
				shared = true
			} else {
				pl.adds = append(pl.adds, op)
			}
			useElement(st, op)
		}
		keepService(st, n, cur)
	}
	// No shared chain was in use in the fresh state: none becomes unused.
	planShared(tx, cfg, st, nil, changed, names)
	if shared {
		// The last service writing a key sets its value.
		for i := range pl.adds {
			pl.adds[i].value = st.elements[pl.adds[i].key].value
		}
	}

	// Leftovers are flushed now, so that nothing refers to them, and deleted by the
	// next sync (their sets stay in st.staleSets until then).
	for _, c := range slices.Sorted(maps.Keys(st.staleChains)) {
		pl.after.Flush(&knftables.Chain{Name: c})
	}
}

// planPartial writes what the changed services need beyond what st says the kernel
// holds: chains whose rules differ, element deletions and additions from the
// difference of the elements they touch, shared chains they start or stop using.
func planPartial(pl *syncPlan, cfg Config, st *tableState, changed map[types.NamespacedName]*serviceRules, names []types.NamespacedName) {
	tx := &pl.before
	addServiceObjects(tx, changed, names)

	// What the elements touched were before, to write only differences.
	before := map[elemKey]elemState{}
	remember := func(k elemKey) {
		if _, ok := before[k]; !ok {
			before[k] = st.elements[k]
		}
	}
	// Chains and sets this sync stops using: rules of this very transaction may still
	// refer to them until their chains are flushed, so they are deleted a sync later.
	var flushChains, staleSets []string
	oldShared := map[types.NamespacedName][]picker{}
	for _, n := range names {
		old, cur := st.services[n], changed[n]
		for _, c := range slices.Sorted(maps.Keys(cur.chains)) {
			delete(st.staleChains, c)
			rules, had := old.chainsOrNil()[c]
			if had && slices.Equal(rules, cur.chains[c]) {
				continue
			}
			writeChain(tx, c, cur.chains[c], had)
		}
		if old != nil {
			oldShared[n] = old.shared
			for c := range old.chains {
				if _, ok := cur.chains[c]; !ok {
					flushChains = append(flushChains, c)
				}
			}
			for s := range old.sets {
				if _, ok := cur.sets[s]; !ok {
					staleSets = append(staleSets, s)
				}
			}
			for _, op := range old.elements {
				remember(op.key)
				releaseElement(st, op.key)
			}
		}
		for _, op := range cur.elements {
			remember(op.key)
			useElement(st, op)
		}
		keepService(st, n, cur)
	}
	flushChains = append(flushChains, planShared(tx, cfg, st, oldShared, changed, names)...)

	keys := slices.SortedFunc(maps.Keys(before), compareElemKeys)
	for _, k := range keys {
		was, now := before[k], st.elements[k]
		if was.refs > 0 && (now.refs == 0 || now.value != was.value) {
			pl.deletes = append(pl.deletes, elemOp{k, was.value})
		}
	}
	for _, k := range keys {
		was, now := before[k], st.elements[k]
		if now.refs > 0 && (was.refs == 0 || now.value != was.value) {
			pl.adds = append(pl.adds, elemOp{k, now.value})
		}
	}

	// Objects flushed by the previous sync and still unused go now; objects this sync
	// stops using are flushed now and deleted by the next sync.
	tx = &pl.after
	for _, c := range slices.Sorted(maps.Keys(st.staleChains)) {
		tx.Delete(&knftables.Chain{Name: c})
		delete(st.staleChains, c)
	}
	for _, s := range slices.Sorted(maps.Keys(st.staleSets)) {
		tx.Delete(&knftables.Set{Name: s})
		delete(st.staleSets, s)
	}
	slices.Sort(flushChains)
	for _, c := range flushChains {
		tx.Flush(&knftables.Chain{Name: c})
		st.staleChains[c] = true
	}
	for _, s := range staleSets {
		st.staleSets[s] = true
	}
}

// addServiceObjects adds the chains and sets of the changed services first, so that
// rules and elements written after them can refer to any of them (the shared chains
// are planShared's).
func addServiceObjects(tx *objectOps, changed map[types.NamespacedName]*serviceRules, names []types.NamespacedName) {
	for _, n := range names {
		for c := range changed[n].chains {
			tx.Add(&knftables.Chain{Name: c})
		}
		for s, timeout := range changed[n].sets {
			tx.Add(&knftables.Set{Name: s, Type: "ipv4_addr", Flags: []knftables.SetFlag{knftables.DynamicFlag}, Timeout: &timeout})
		}
	}
}

// writeChain writes the rules of chain c, emptying it first when it may hold rules.
func writeChain(tx *objectOps, c string, rules []string, flush bool) {
	if flush {
		tx.Flush(&knftables.Chain{Name: c})
	}
	for _, rule := range rules {
		tx.Add(&knftables.Rule{Chain: c, Rule: rule})
	}
}

// useElement counts one more service using op's element, whose value it sets.
func useElement(st *tableState, op elemOp) {
	st.elements[op.key] = elemState{value: op.value, refs: st.elements[op.key].refs + 1}
}

// releaseElement counts one service fewer using k's element, forgetting it at zero.
func releaseElement(st *tableState, k elemKey) {
	if e, ok := st.elements[k]; ok {
		if e.refs--; e.refs == 0 {
			delete(st.elements, k)
		} else {
			st.elements[k] = e
		}
	}
}

// keepService records cur as the rules of service n (forgetting a service with none)
// and its sets as in use.
func keepService(st *tableState, n types.NamespacedName, cur *serviceRules) {
	for s := range cur.sets {
		delete(st.staleSets, s)
	}
	if len(cur.chains) == 0 && len(cur.sets) == 0 && len(cur.elements) == 0 {
		delete(st.services, n)
	} else {
		st.services[n] = cur
	}
}

// planShared writes the shared chains the changed services start using and returns
// those no service uses any more (to be flushed now and deleted a sync later). Their
// rules depend only on their name, so a chain already in use is left alone.
func planShared(tx *objectOps, cfg Config, st *tableState, oldShared map[types.NamespacedName][]picker,
	changed map[types.NamespacedName]*serviceRules, names []types.NamespacedName) []string {
	before := map[string]int{}
	pickers := map[string]picker{}
	for _, n := range names {
		for _, pk := range oldShared[n] {
			if _, ok := before[pk.name]; !ok {
				before[pk.name] = st.shared[pk.name]
			}
			st.shared[pk.name]--
		}
		for _, pk := range changed[n].shared {
			if _, ok := before[pk.name]; !ok {
				before[pk.name] = st.shared[pk.name]
			}
			st.shared[pk.name]++
			pickers[pk.name] = pk
		}
	}
	var unused []string
	for _, c := range slices.Sorted(maps.Keys(before)) {
		switch now := st.shared[c]; {
		case now > 0 && before[c] == 0:
			delete(st.staleChains, c)
			ch := &knftables.Chain{Name: c}
			tx.Add(ch)
			tx.Flush(ch)
			for _, r := range pickers[c].rules(cfg) {
				tx.Add(&knftables.Rule{Chain: c, Rule: r})
			}
		case now <= 0:
			delete(st.shared, c)
			if before[c] > 0 {
				unused = append(unused, c)
			}
		}
	}
	return unused
}

// chainsOrNil lets callers index the chains of a service that may not exist yet.
func (r *serviceRules) chainsOrNil() map[string][]string {
	if r == nil {
		return nil
	}
	return r.chains
}

// compareNames orders services by namespace, then name.
func compareNames(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func compareElemKeys(a, b elemKey) int {
	if c := strings.Compare(a.container, b.container); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

func element(op elemOp) *knftables.Element {
	e := &knftables.Element{Key: []string{op.key.key}}
	if isSkeletonMap(op.key.container) {
		e.Map = op.key.container
		e.Value = []string{op.value}
	} else {
		e.Set = op.key.container
	}
	return e
}

// writeSkeleton (re)creates the table and its fixed chains, sets and maps, emptied.
func writeSkeleton(tx *objectOps, cfg Config) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("rules for tranche's service proxy")})
	chains, sets := skeleton(cfg)
	for _, c := range chains {
		ch := &knftables.Chain{Name: c.name}
		if c.hook != "" {
			ch.Type, ch.Hook, ch.Priority = knftables.PtrTo(c.typ), knftables.PtrTo(c.hook), knftables.PtrTo(c.priority)
		}
		tx.Add(ch)
		tx.Flush(ch)
	}
	for _, s := range sets {
		if s.isMap {
			m := &knftables.Map{Name: s.name, Type: s.typ, TypeOf: s.typeOf, Flags: s.flags}
			tx.Add(m)
			tx.Flush(m)
		} else {
			set := &knftables.Set{Name: s.name, Type: s.typ, Flags: s.flags}
			tx.Add(set)
			tx.Flush(set)
		}
	}
	for _, c := range chains {
		for _, rule := range c.rules {
			tx.Add(&knftables.Rule{Chain: c.name, Rule: rule})
		}
	}
}

// listExisting reads the per-service chains and sets of the kernel table (every object
// that is not part of the skeleton), for a full sync to clean up.
func listExisting(ctx context.Context, nft knftables.Interface, cfg Config) (*existing, error) {
	chains, sets := skeleton(cfg)
	fixed := map[string]bool{}
	for _, c := range chains {
		fixed[c.name] = true
	}
	for _, s := range sets {
		fixed[s.name] = true
	}
	ex := &existing{}
	for _, kind := range []string{"chain", "set"} {
		names, err := nft.List(ctx, kind)
		if err != nil && !knftables.IsNotFound(err) {
			return nil, fmt.Errorf("listing %ss of table %s: %w", kind, TableName, err)
		}
		for _, n := range names {
			if fixed[n] {
				continue
			}
			if kind == "chain" {
				ex.chains = append(ex.chains, n)
			} else {
				ex.sets = append(ex.sets, n)
			}
		}
	}
	return ex, nil
}
