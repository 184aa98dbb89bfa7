package gc

import (
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState classifies one ownerReference of a dependent after a live
// look-up of the owner it names.
type ownerState int

const (
	// solid: the owner exists, with the referenced uid, and is not
	// waiting for its dependents.
	solid ownerState = iota
	// dangling: no object of that name, or one with another uid.
	dangling
	// waiting: the owner is being deleted in the foreground.
	waiting
)

// classifyOwner decides the state of ref given the live owner found by
// name in the namespace the reference can reach (nil: not found).
func classifyOwner(ref metav1.OwnerReference, owner *metav1.PartialObjectMetadata) ownerState {
	switch {
	case owner == nil || owner.UID != ref.UID:
		return dangling
	case owner.DeletionTimestamp != nil && hasFinalizer(owner.Finalizers, metav1.FinalizerDeleteDependents):
		return waiting
	}
	return solid
}

// errNamespacedOwnerOfClusterScoped marks a cluster-scoped object whose
// ownerReference names a namespaced kind: such a reference can never be
// resolved, and Kubernetes leaves the object alone rather than retrying or
// deleting it.
var errNamespacedOwnerOfClusterScoped = errors.New("cluster-scoped object refers to a namespaced owner")

// ownerCheck is a reference with its classification.
type ownerCheck struct {
	ref   metav1.OwnerReference
	state ownerState
}

// dependentPlan is what to do with one dependent after checking its owners.
type dependentPlan struct {
	// unblock: first clear blockOwnerDeletion on all its references, to
	// break a foreground-deletion cycle.
	unblock bool
	// dropOwners: remove the references to these owner uids.
	dropOwners []types.UID
	// delete, when set, deletes the object with this propagation policy.
	delete *metav1.DeletionPropagation
}

// planDependent decides, as Kubernetes' attemptToDeleteItem does, what to
// do with latest given its checked owners: nothing while every owner is
// solid; drop dangling and waiting references while one owner is solid;
// otherwise delete it, in the foreground when an owner waits for it and it
// has dependents of its own, else with the policy its own finalizers ask
// for (orphan, foreground, or background by default).
func planDependent(latest *metav1.PartialObjectMetadata, checks []ownerCheck, hasDependents, dependentDeletingDependents bool) dependentPlan {
	var p dependentPlan
	if len(checks) == 0 {
		return p
	}
	var nSolid, nWaiting int
	var drop []types.UID
	for _, c := range checks {
		switch c.state {
		case solid:
			nSolid++
		case waiting:
			nWaiting++
			drop = append(drop, c.ref.UID)
		case dangling:
			drop = append(drop, c.ref.UID)
		}
	}
	var policy metav1.DeletionPropagation
	switch {
	case nSolid > 0:
		p.dropOwners = drop
		return p
	case nWaiting > 0 && hasDependents:
		p.unblock = dependentDeletingDependents
		policy = metav1.DeletePropagationForeground
	case hasFinalizer(latest.Finalizers, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case hasFinalizer(latest.Finalizers, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	default:
		policy = metav1.DeletePropagationBackground
	}
	p.delete = &policy
	return p
}

// blockingDependents returns the dependents of owner that hold it back
// from foreground deletion: those whose reference to it has
// blockOwnerDeletion set.
func blockingDependents(owner types.UID, dependents []*node) []*node {
	var out []*node
	for _, d := range dependents {
		for _, ref := range d.owners {
			if ref.UID == owner && blocks(ref) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// metaPatch is the JSON merge patch body the collector sends. Carrying the
// resourceVersion makes the server refuse the patch if the object changed
// since it was read, so no concurrent change is lost.
type metaPatch struct {
	Metadata patchedMeta `json:"metadata"`
}

type patchedMeta struct {
	ResourceVersion string                   `json:"resourceVersion"`
	OwnerReferences *[]metav1.OwnerReference `json:"ownerReferences,omitempty"`
	Finalizers      *[]string                `json:"finalizers,omitempty"`
}

// dropOwnersPatch returns a merge patch removing the references to the
// given uids from obj, or nil when obj has none of them.
func dropOwnersPatch(obj *metav1.PartialObjectMetadata, uids []types.UID) ([]byte, error) {
	drop := map[types.UID]bool{}
	for _, u := range uids {
		drop[u] = true
	}
	keep := []metav1.OwnerReference{}
	for _, r := range obj.OwnerReferences {
		if !drop[r.UID] {
			keep = append(keep, r)
		}
	}
	if len(keep) == len(obj.OwnerReferences) {
		return nil, nil
	}
	return marshalPatch(patchedMeta{ResourceVersion: obj.ResourceVersion, OwnerReferences: &keep})
}

// unblockPatch returns a merge patch setting blockOwnerDeletion to false on
// every reference of obj, or nil when none blocks.
func unblockPatch(obj *metav1.PartialObjectMetadata) ([]byte, error) {
	refs := make([]metav1.OwnerReference, len(obj.OwnerReferences))
	changed := false
	for i, r := range obj.OwnerReferences {
		if blocks(r) {
			changed = true
			off := false
			r.BlockOwnerDeletion = &off
		}
		refs[i] = r
	}
	if !changed {
		return nil, nil
	}
	return marshalPatch(patchedMeta{ResourceVersion: obj.ResourceVersion, OwnerReferences: &refs})
}

// removeFinalizerPatch returns a merge patch removing finalizer from obj,
// or nil when obj does not carry it.
func removeFinalizerPatch(obj *metav1.PartialObjectMetadata, finalizer string) ([]byte, error) {
	keep := []string{}
	for _, f := range obj.Finalizers {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	if len(keep) == len(obj.Finalizers) {
		return nil, nil
	}
	return marshalPatch(patchedMeta{ResourceVersion: obj.ResourceVersion, Finalizers: &keep})
}

func marshalPatch(m patchedMeta) ([]byte, error) {
	b, err := json.Marshal(metaPatch{Metadata: m})
	if err != nil {
		return nil, fmt.Errorf("encoding metadata patch: %w", err)
	}
	return b, nil
}
