package gc

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var now = metav1.Now()

// makeObj returns the metadata of an object of kind (apps/v1 unless the
// kind is core), changed by mutate.
func makeObj(kind, namespace, name string, uid types.UID, mutate func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
	apiVersion := "apps/v1"
	switch kind {
	case "Pod", "ConfigMap", "Namespace", "Node":
		apiVersion = "v1"
	}
	o := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid, ResourceVersion: "1"},
	}
	if mutate != nil {
		mutate(o)
	}
	return o
}

// ownedBy returns a mutation adding an ownerReference to owner.
func ownedBy(owner *metav1.PartialObjectMetadata, block bool) func(*metav1.PartialObjectMetadata) {
	return func(o *metav1.PartialObjectMetadata) {
		ref := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID}
		if block {
			ref.BlockOwnerDeletion = &block
		}
		o.OwnerReferences = append(o.OwnerReferences, ref)
	}
}

// deleting returns a mutation marking the object deleted with finalizers.
func deleting(finalizers ...string) func(*metav1.PartialObjectMetadata) {
	return func(o *metav1.PartialObjectMetadata) {
		o.DeletionTimestamp = &now
		o.Finalizers = finalizers
	}
}

func idOf(o *metav1.PartialObjectMetadata) identity {
	return identity{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}

// event is one informer notification: an object seen, or a uid gone.
type event struct {
	obj  *metav1.PartialObjectMetadata
	gone types.UID
}

func TestGraph(t *testing.T) {
	deploy := makeObj("Deployment", "ns", "web", "d1", nil)
	rs := makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, true))
	pod := makeObj("Pod", "ns", "web-1-a", "p1", ownedBy(rs, true))

	tests := []struct {
		name        string
		before      []event // applied first, their work ignored
		events      []event
		wantDelete  []types.UID
		wantOrphan  []types.UID
		wantNodes   []types.UID // sorted uids left in the graph
		wantVirtual []types.UID
	}{
		{
			name:        "dependent seen before its owner creates a virtual owner to check",
			events:      []event{{obj: rs}},
			wantDelete:  []types.UID{"d1"},
			wantNodes:   []types.UID{"d1", "r1"},
			wantVirtual: []types.UID{"d1"},
		},
		{
			name:      "owner seen first: nothing to check",
			events:    []event{{obj: deploy}, {obj: rs}},
			wantNodes: []types.UID{"d1", "r1"},
		},
		{
			name:       "owner gone: its dependents are checked and it stays virtual for them",
			before:     []event{{obj: deploy}, {obj: rs}},
			events:     []event{{gone: "d1"}},
			wantDelete: []types.UID{"r1"},
			wantNodes:  []types.UID{"d1", "r1"}, wantVirtual: []types.UID{"d1"},
		},
		{
			name:      "last dependent of a virtual owner gone: the virtual owner goes too",
			before:    []event{{obj: rs}},
			events:    []event{{gone: "r1"}},
			wantNodes: []types.UID{},
		},
		{
			name:       "foreground deletion of an owner checks it and its dependents",
			before:     []event{{obj: deploy}, {obj: rs}},
			events:     []event{{obj: makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerDeleteDependents))}},
			wantDelete: []types.UID{"d1", "r1"},
			wantNodes:  []types.UID{"d1", "r1"},
		},
		{
			name:       "orphan deletion of an owner queues it for orphaning",
			before:     []event{{obj: deploy}, {obj: rs}},
			events:     []event{{obj: makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerOrphanDependents))}},
			wantOrphan: []types.UID{"d1"},
			wantNodes:  []types.UID{"d1", "r1"},
		},
		{
			name: "a dependent gone wakes its owner deleting in the foreground",
			before: []event{
				{obj: makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerDeleteDependents))},
				{obj: rs},
			},
			events:     []event{{gone: "r1"}},
			wantDelete: []types.UID{"d1"},
			wantNodes:  []types.UID{"d1"},
		},
		{
			name: "dropping the blocking flag wakes the owner deleting in the foreground",
			before: []event{
				{obj: makeObj("Deployment", "ns", "web", "d1", deleting(metav1.FinalizerDeleteDependents))},
				{obj: rs},
			},
			events:     []event{{obj: makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, false))}},
			wantDelete: []types.UID{"d1"},
			wantNodes:  []types.UID{"d1", "r1"},
		},
		{
			name:   "a reference whose uid belongs to an object in another namespace checks the dependent",
			before: []event{{obj: makeObj("Deployment", "other", "web", "d1", nil)}},
			events: []event{{obj: makeObj("ReplicaSet", "ns", "web-1", "r1", ownedBy(deploy, false))}},
			// deploy names ns/web but uid d1 is other/web.
			wantDelete: []types.UID{"r1"},
			wantNodes:  []types.UID{"d1", "r1"},
		},
		{
			name:      "a chain keeps every link",
			events:    []event{{obj: deploy}, {obj: rs}, {obj: pod}},
			wantNodes: []types.UID{"d1", "p1", "r1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGraph()
			apply := func(ev event) work {
				if ev.obj != nil {
					return g.observe(idOf(ev.obj), ev.obj)
				}
				return g.forget(ev.gone)
			}
			for _, ev := range tc.before {
				apply(ev)
			}
			var w work
			for _, ev := range tc.events {
				w.merge(apply(ev))
			}
			if diff := cmp.Diff(tc.wantDelete, sortedUIDs(w.attemptToDelete)); diff != "" {
				t.Errorf("attemptToDelete (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOrphan, sortedUIDs(w.attemptToOrphan)); diff != "" {
				t.Errorf("attemptToOrphan (-want +got):\n%s", diff)
			}
			var nodes, virtual []types.UID
			nodes = []types.UID{}
			for uid, n := range g.nodes {
				nodes = append(nodes, uid)
				if !n.observed {
					virtual = append(virtual, uid)
				}
				// Every link is kept on both ends.
				for _, ref := range n.owners {
					if o := g.nodes[ref.UID]; o == nil {
						t.Errorf("%s references missing owner %s", uid, ref.UID)
					} else if _, ok := o.dependents[uid]; !ok {
						t.Errorf("owner %s does not list dependent %s", ref.UID, uid)
					}
				}
			}
			if diff := cmp.Diff(tc.wantNodes, sortedUIDs(nodes)); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVirtual, sortedUIDs(virtual)); diff != "" {
				t.Errorf("virtual nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// sortedUIDs sorts and dedups, as the work queues would.
func sortedUIDs(uids []types.UID) []types.UID {
	if uids == nil {
		return nil
	}
	out := slices.Clone(uids)
	slices.Sort(out)
	return slices.Compact(out)
}
