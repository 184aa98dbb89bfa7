package proxy

import (
	"context"
	"slices"

	"sigs.k8s.io/knftables"
)

// syncPlan is one sync's nftables operations, run as one transaction in this order:
// before (objects, then the rules that fill chains), deletes and adds (element changes
// of the fixed sets and maps: deletions first, so that a changed map value is a delete
// and an add of the same key), then after (flushing and deleting objects that no
// element or rule may refer to any more).
type syncPlan struct {
	before, after objectOps
	deletes, adds []elemOp
}

// elemOp is one element of a fixed set or map to delete or add, value "" for a set.
type elemOp struct {
	key   elemKey
	value string
}

// objectOps is a list of operations on chains, sets and rules, with the calls of a
// knftables.Transaction.
type objectOps []objectOp

type objectVerb int

const (
	verbAdd objectVerb = iota
	verbFlush
	verbDelete
)

type objectOp struct {
	verb objectVerb
	obj  knftables.Object
}

// Add adds an "add" operation.
func (o *objectOps) Add(obj knftables.Object) { *o = append(*o, objectOp{verbAdd, obj}) }

// Flush adds a "flush" operation.
func (o *objectOps) Flush(obj knftables.Object) { *o = append(*o, objectOp{verbFlush, obj}) }

// Delete adds a "delete" operation.
func (o *objectOps) Delete(obj knftables.Object) { *o = append(*o, objectOp{verbDelete, obj}) }

// addTo appends the operations to tx.
func (o objectOps) addTo(tx *knftables.Transaction) {
	for _, op := range o {
		switch op.verb {
		case verbAdd:
			tx.Add(op.obj)
		case verbFlush:
			tx.Flush(op.obj)
		case verbDelete:
			tx.Delete(op.obj)
		}
	}
}

// numOperations counts the plan's operations, an element change counting as one.
func (pl *syncPlan) numOperations() int {
	return len(pl.before) + len(pl.deletes) + len(pl.adds) + len(pl.after)
}

// transaction fills tx with the whole plan, one knftables.Element per element change:
// what any knftables.Interface (the fake included) can run. Element changes are sorted
// by container and key (in place), so that a fake's dump does not depend on the order
// in which services first used their elements.
func (pl *syncPlan) transaction(tx *knftables.Transaction) {
	pl.before.addTo(tx)
	byKey := func(a, b elemOp) int { return compareElemKeys(a.key, b.key) }
	slices.SortFunc(pl.deletes, byKey)
	slices.SortFunc(pl.adds, byKey)
	for _, op := range pl.deletes {
		tx.Delete(element(op))
	}
	for _, op := range pl.adds {
		tx.Add(element(op))
	}
	pl.after.addTo(tx)
}

// planRunner is implemented by the nftables writers that run a plan better than as
// one knftables.Transaction (see Kernel).
type planRunner interface {
	runPlan(ctx context.Context, pl *syncPlan) error
	// checkPlan is runPlan's dry run: the kernel validates pl and nothing changes.
	checkPlan(ctx context.Context, pl *syncPlan) error
}

// apply runs pl on nft as one transaction.
func apply(ctx context.Context, nft knftables.Interface, pl *syncPlan) error {
	if r, ok := nft.(planRunner); ok {
		return r.runPlan(ctx, pl)
	}
	tx := nft.NewTransaction()
	pl.transaction(tx)
	return nft.Run(ctx, tx)
}

// check dry-runs pl on nft (`nft --check`): the kernel validates the transaction and
// discards it.
func check(ctx context.Context, nft knftables.Interface, pl *syncPlan) error {
	if r, ok := nft.(planRunner); ok {
		return r.checkPlan(ctx, pl)
	}
	tx := nft.NewTransaction()
	pl.transaction(tx)
	return nft.Check(ctx, tx)
}
