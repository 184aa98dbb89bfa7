package gc

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// identity names one object of the graph.
type identity struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// node is one object of the ownership graph. A node that is not observed
// is virtual: known only from the ownerReferences of its dependents, with
// an identity taken from the first such reference.
type node struct {
	id         identity
	observed   bool
	owners     []metav1.OwnerReference
	dependents map[types.UID]struct{}
	// beingDeleted: the object has a deletionTimestamp.
	beingDeleted bool
	// deletingDependents: being deleted with the foregroundDeletion finalizer.
	deletingDependents bool
	// orphaning: being deleted with the orphan finalizer.
	orphaning bool
}

// work is what an event asks the workers to look at.
type work struct {
	attemptToDelete []types.UID
	attemptToOrphan []types.UID
}

func (w *work) merge(o work) {
	w.attemptToDelete = append(w.attemptToDelete, o.attemptToDelete...)
	w.attemptToOrphan = append(w.attemptToOrphan, o.attemptToOrphan...)
}

// graph is the ownership graph, keyed by uid. It is not safe for
// concurrent use; the Collector guards it.
type graph struct {
	nodes map[types.UID]*node
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}}
}

// observe records the current state of an object seen by a monitor and
// returns the work it causes: owners it references that nobody has seen
// yet, dependents whose reference to it does not match it, owners that a
// dropped reference may unblock, and the object itself when it is being
// deleted in the foreground or with orphaning.
func (g *graph) observe(id identity, obj *metav1.PartialObjectMetadata) work {
	var w work
	n := g.nodes[id.UID]
	switch {
	case n == nil:
		n = &node{id: id, observed: true, owners: obj.OwnerReferences, dependents: map[types.UID]struct{}{}}
		g.nodes[id.UID] = n
		w.merge(g.addDependent(n, n.owners))
	default:
		wasVirtual := !n.observed
		n.id, n.observed = id, true
		added, removed, unblocked := diffOwners(n.owners, obj.OwnerReferences)
		for _, ref := range append(removed, unblocked...) {
			if o := g.nodes[ref.UID]; o != nil && o.deletingDependents {
				w.attemptToDelete = append(w.attemptToDelete, o.id.UID)
			}
		}
		g.removeDependent(n, removed)
		n.owners = obj.OwnerReferences
		w.merge(g.addDependent(n, added))
		if wasVirtual {
			for uid := range n.dependents {
				if d := g.nodes[uid]; d != nil && !referencesMatch(d, n) {
					w.attemptToDelete = append(w.attemptToDelete, uid)
				}
			}
		}
	}
	n.beingDeleted = obj.DeletionTimestamp != nil
	n.deletingDependents = n.beingDeleted && hasFinalizer(obj.Finalizers, metav1.FinalizerDeleteDependents)
	n.orphaning = n.beingDeleted && hasFinalizer(obj.Finalizers, metav1.FinalizerOrphanDependents)
	if n.orphaning {
		w.attemptToOrphan = append(w.attemptToOrphan, n.id.UID)
	}
	if n.deletingDependents {
		w.attemptToDelete = append(w.attemptToDelete, n.id.UID)
		for uid := range n.dependents {
			w.attemptToDelete = append(w.attemptToDelete, uid)
		}
	}
	return w
}

// forget records that the object uid is gone: its dependents must check
// their owners, and owners waiting for it may be unblocked. A node that
// still has dependents stays as a virtual node so their links stay whole.
func (g *graph) forget(uid types.UID) work {
	var w work
	n := g.nodes[uid]
	if n == nil || !n.observed {
		return w
	}
	for _, ref := range n.owners {
		if o := g.nodes[ref.UID]; o != nil && o.deletingDependents {
			w.attemptToDelete = append(w.attemptToDelete, o.id.UID)
		}
	}
	g.removeDependent(n, n.owners)
	for d := range n.dependents {
		w.attemptToDelete = append(w.attemptToDelete, d)
	}
	if len(n.dependents) == 0 {
		delete(g.nodes, uid)
		return w
	}
	n.observed, n.owners = false, nil
	n.beingDeleted, n.deletingDependents, n.orphaning = false, false, false
	return w
}

// addDependent links n to the owners of refs, creating virtual owners
// (which need a check) where none is known.
func (g *graph) addDependent(n *node, refs []metav1.OwnerReference) work {
	var w work
	for _, ref := range refs {
		o := g.nodes[ref.UID]
		if o == nil {
			o = &node{
				id:         identity{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: n.id.Namespace, Name: ref.Name, UID: ref.UID},
				dependents: map[types.UID]struct{}{},
			}
			g.nodes[ref.UID] = o
			w.attemptToDelete = append(w.attemptToDelete, ref.UID)
		} else if o.observed && !referencesMatch(n, o) {
			// The uid belongs to another object than the reference names
			// (or one in another namespace): the owner it names is absent.
			w.attemptToDelete = append(w.attemptToDelete, n.id.UID)
		}
		o.dependents[n.id.UID] = struct{}{}
	}
	return w
}

// removeDependent unlinks n from the owners of refs, dropping virtual
// owners nobody references any more.
func (g *graph) removeDependent(n *node, refs []metav1.OwnerReference) {
	for _, ref := range refs {
		o := g.nodes[ref.UID]
		if o == nil {
			continue
		}
		delete(o.dependents, n.id.UID)
		if !o.observed && len(o.dependents) == 0 {
			delete(g.nodes, ref.UID)
		}
	}
}

// referencesMatch reports whether every reference of dependent d to the
// observed owner o names o: same group, kind and name, and a namespace a
// reference from d can reach (d's own, or none for a cluster-scoped owner).
func referencesMatch(d, o *node) bool {
	for _, ref := range d.owners {
		if ref.UID != o.id.UID {
			continue
		}
		if ref.Kind != o.id.Kind || ref.Name != o.id.Name || groupOf(ref.APIVersion) != groupOf(o.id.APIVersion) {
			return false
		}
		if o.id.Namespace != "" && o.id.Namespace != d.id.Namespace {
			return false
		}
	}
	return true
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}

// diffOwners compares two ownerReference lists by uid: added and removed
// references, and references whose blockOwnerDeletion was turned off.
func diffOwners(old, cur []metav1.OwnerReference) (added, removed, unblocked []metav1.OwnerReference) {
	oldByUID := map[types.UID]metav1.OwnerReference{}
	for _, r := range old {
		oldByUID[r.UID] = r
	}
	curByUID := map[types.UID]struct{}{}
	for _, r := range cur {
		curByUID[r.UID] = struct{}{}
		o, ok := oldByUID[r.UID]
		switch {
		case !ok:
			added = append(added, r)
		case blocks(o) && !blocks(r):
			unblocked = append(unblocked, r)
		}
	}
	for _, r := range old {
		if _, ok := curByUID[r.UID]; !ok {
			removed = append(removed, r)
		}
	}
	return added, removed, unblocked
}

func blocks(r metav1.OwnerReference) bool {
	return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
}

func hasFinalizer(finalizers []string, f string) bool {
	for _, x := range finalizers {
		if x == f {
			return true
		}
	}
	return false
}
