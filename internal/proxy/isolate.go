package proxy

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// isolate is what Sync does when the kernel refused its transaction (failed, the
// error): find the services whose rules the kernel refuses, and program every other
// one. The kernel is unchanged (a transaction is all or nothing), so the search runs
// dry: each candidate table is checked with `nft --check` and nothing is written
// until the last step, one transaction of everything accepted. Services left out get
// empty rules, as if they had none: a full sync leaves them out of the table, a
// partial one removes what they had.
//
// The search starts from a base that must pass alone (the skeleton for a full sync;
// for a partial one, its changed services but the suspects, the services refused
// before). Candidates go in groups, suspects last, so that when they are still the
// culprits the others pass in one check. A group is checked on top of the base; a
// refused group is halved and each half checked the same way, down to single
// services, which are refused. The checks shrink as they go down, so finding k
// culprits among n services costs about 2k·log2(n) checks but only some 3k times the
// work of one full check. Services refused only together with others they are not
// checked with would pass that search: when the table it accepts is refused too, a
// second search grows the accepted set instead, checking each group on top of
// everything accepted before, so that its final table is one the kernel has accepted
// (each check then costs a full one).
//
// before is the state the partial plan started from (nil for a full sync, which
// starts from nothing); desired holds the rules of every changed service; ex is
// non-nil for a full sync. It returns the state and plan it applied, with the refused
// services and the kernel's error for each, or an error when the base alone is
// refused: then no service is to blame.
func (p *Proxier) isolate(ctx context.Context, before *tableState, desired map[types.NamespacedName]*serviceRules,
	ex *existing, suspects sets.Set[types.NamespacedName], failed error) (*tableState, *syncPlan, map[types.NamespacedName]error, error) {
	full := ex != nil
	plan := func(accepted sets.Set[types.NamespacedName]) (*tableState, *syncPlan) {
		st := newTableState(0, 0)
		if !full {
			st = before.clone()
		}
		rules := make(map[types.NamespacedName]*serviceRules, len(desired))
		for n, r := range desired {
			if accepted.Has(n) {
				rules[n] = r
			} else {
				rules[n] = &serviceRules{}
			}
		}
		return st, planSync(p.cfg.Config, st, rules, ex)
	}
	try := func(accepted sets.Set[types.NamespacedName]) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, pl := plan(accepted)
		return check(ctx, p.nft, pl)
	}
	var others []types.NamespacedName
	for _, n := range slices.SortedFunc(maps.Keys(desired), compareNames) {
		if !suspects.Has(n) {
			others = append(others, n)
		}
	}
	base := sets.New[types.NamespacedName]()
	groups := [][]types.NamespacedName{slices.SortedFunc(maps.Keys(suspects), compareNames)}
	if full {
		groups = append([][]types.NamespacedName{others}, groups...)
	} else {
		base.Insert(others...)
	}
	if err := try(base); err != nil {
		return nil, nil, nil, fmt.Errorf("%w (and without any of the services in question: %w)", failed, err)
	}
	p.cfg.Logger.Info("the kernel refused a sync: looking for the services it refuses", "node", p.cfg.NodeName,
		"full", full, "services", len(desired), "suspects", suspects.Len(), "err", failed)
	// The failed transaction was the base and every group: when there is one group,
	// the kernel has already refused it whole.
	var known error
	if len(groups[0]) == 0 || len(groups[1:]) == 0 || len(groups[1]) == 0 {
		known = failed
	}
	refused := map[types.NamespacedName]error{}
	var find func(names []types.NamespacedName, refusedWhole error) error
	find = func(names []types.NamespacedName, refusedWhole error) error {
		if len(names) == 0 {
			return nil
		}
		if refusedWhole == nil {
			if refusedWhole = try(base.Clone().Insert(names...)); refusedWhole == nil {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(names) == 1 {
			refused[names[0]] = refusedWhole
			return nil
		}
		half := len(names) / 2
		if err := find(names[:half], nil); err != nil {
			return err
		}
		return find(names[half:], nil)
	}
	for _, g := range groups {
		if err := find(g, known); err != nil {
			return nil, nil, nil, fmt.Errorf("%w (then, while looking for the services refused: %w)", failed, err)
		}
	}
	accepted := base.Clone()
	for _, g := range groups {
		for _, n := range g {
			if _, ok := refused[n]; !ok {
				accepted.Insert(n)
			}
		}
	}
	st, pl := plan(accepted)
	err := apply(ctx, p.nft, pl)
	if err == nil {
		return st, pl, refused, nil
	}
	p.cfg.Logger.Info("the kernel refused the services it accepted one group at a time: looking again, on top of everything accepted",
		"node", p.cfg.NodeName, "refused", len(refused), "err", err)
	accepted, refused = base.Clone(), map[types.NamespacedName]error{}
	var grow func(names []types.NamespacedName) error
	grow = func(names []types.NamespacedName) error {
		if len(names) == 0 {
			return nil
		}
		candidate := accepted.Clone().Insert(names...)
		err := try(candidate)
		switch {
		case err == nil:
			accepted = candidate
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case len(names) == 1:
			refused[names[0]] = err
			return nil
		}
		half := len(names) / 2
		if err := grow(names[:half]); err != nil {
			return err
		}
		return grow(names[half:])
	}
	for _, g := range groups {
		if err := grow(g); err != nil {
			return nil, nil, nil, fmt.Errorf("%w (then, while looking for the services refused: %w)", failed, err)
		}
	}
	st, pl = plan(accepted)
	if err := apply(ctx, p.nft, pl); err != nil {
		return nil, nil, nil, fmt.Errorf("%w (then without the %d services refused, although checked: %w)", failed, len(refused), err)
	}
	return st, pl, refused, nil
}

// clone returns a copy of st that planSync can update without touching st. The rules
// of each service are shared: nothing changes them once built.
func (st *tableState) clone() *tableState {
	return &tableState{
		services:    maps.Clone(st.services),
		elements:    maps.Clone(st.elements),
		shared:      maps.Clone(st.shared),
		staleChains: maps.Clone(st.staleChains),
		staleSets:   maps.Clone(st.staleSets),
	}
}
